package importer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/db"
)

// Row is one row of the old store, as the source read it.
type Row struct {
	// Ref says where the row is: "line 12" of a file, "row 12" of a query.
	Ref         string
	Tenant      string
	OperationID string
	// Payload is the request as the store kept it (any JSON); nil when the
	// store kept only its own hash of it (RequestHash).
	Payload []byte
	// Response is the saved response (any JSON); nil when there is none.
	Response []byte
	// CreatedAt is nil when the store has none.
	CreatedAt *time.Time
	// Status is "finished" for a row whose operation completed; anything
	// else (rocket-rides' other recovery points) is unfinished.
	Status string
	// Locked is true for a row some worker still holds (rocket-rides'
	// locked_at).
	Locked bool
	// RequestHash is the store's own hash of the request, hex.
	RequestHash string
	// Problem is set when the row could not be read at all.
	Problem string
}

// Source yields the rows of a store; Next returns io.EOF after the last.
type Source interface {
	Next(ctx context.Context) (Row, error)
	// Digest is "sha256:<hex>" of what was read, once Next returned io.EOF.
	Digest() string
	// Describe names the source for the plan (no secret).
	Describe() string
	Close() error
}

// ndjsonLine is one line of an NDJSON export.
type ndjsonLine struct {
	TenantID    string          `json:"tenant_id"`
	OperationID string          `json:"operation_id"`
	Payload     json.RawMessage `json:"payload"`
	Response    json.RawMessage `json:"response"`
	CreatedAt   *time.Time      `json:"created_at"`
	Status      string          `json:"status"`
	Locked      bool            `json:"locked"`
	RequestHash string          `json:"request_hash"`
}

type ndjsonSource struct {
	name string
	f    *os.File
	r    *bufio.Reader
	sum  hash.Hash
	line int
}

// OpenNDJSON reads an export, one JSON object a line: tenant_id,
// operation_id, payload (or request_hash), response, created_at (RFC 3339),
// status ("finished" or not) and locked (optional). The digest is the
// file's sha256.
func OpenNDJSON(path string) (Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	s := &ndjsonSource{name: path, f: f, sum: sha256.New()}
	s.r = bufio.NewReaderSize(io.TeeReader(f, s.sum), 1<<20)
	return s, nil
}

func (s *ndjsonSource) Describe() string { return "ndjson " + s.name }
func (s *ndjsonSource) Close() error     { return s.f.Close() }
func (s *ndjsonSource) Digest() string   { return "sha256:" + hex.EncodeToString(s.sum.Sum(nil)) }

func (s *ndjsonSource) Next(ctx context.Context) (Row, error) {
	for {
		line, err := s.r.ReadSlice('\n')
		tooLong := false
		if errors.Is(err, bufio.ErrBufferFull) {
			tooLong = true
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = s.r.ReadSlice('\n')
			}
		}
		if err != nil && (err != io.EOF || len(line) == 0) {
			return Row{}, err
		}
		s.line++
		row := Row{Ref: fmt.Sprintf("line %d", s.line)}
		if tooLong {
			row.Problem = "line longer than 1 MiB"
			return row, nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var l ndjsonLine
		if err := json.Unmarshal(line, &l); err != nil {
			row.Problem = "not a JSON object of the import's fields: " + err.Error()
			return row, nil
		}
		row.Tenant, row.OperationID, row.CreatedAt, row.Status, row.Locked, row.RequestHash =
			l.TenantID, l.OperationID, l.CreatedAt, l.Status, l.Locked, l.RequestHash
		row.Payload, row.Response = jsonOrNil(l.Payload), jsonOrNil(l.Response)
		return row, nil
	}
}

// jsonOrNil is nil for an absent or null value.
func jsonOrNil(raw json.RawMessage) []byte {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// PostgresSource is a store read by a query on its own database.
type PostgresSource struct {
	// DSN holds no secret (the rule of replay sources); PasswordEnv names
	// the IDEMCTL_SOURCE_* variable that holds the password.
	DSN, Query, PasswordEnv string
	// Since, when set, reads only the rows after it.
	Since *Cursor
	// Unordered reads the rows in no particular order (no sort on the
	// store's database): an import's run needs no order, its plan does.
	Unordered bool
}

type postgresSource struct {
	cfg  PostgresSource
	conn *pgx.Conn
	tx   pgx.Tx
	rows pgx.Rows
	sum  hash.Hash
	n    int
	cols map[string]bool
	// pending is the last row's bytes, not yet in sum.
	pending []byte
	scan    scanRow
}

// Open validates the source as a replay source is validated (no secret in
// the DSN, a password only from an IDEMCTL_SOURCE_* variable), connects and
// starts the query in a read-only, repeatable-read transaction. The query
// returns columns named tenant_id, operation_id, payload (or request_hash),
// response, created_at, status and optionally locked; the rows come in the
// order (created_at, tenant_id, operation_id), after Since when set.
func (p PostgresSource) Open(ctx context.Context) (Source, error) {
	src := horizon.Source{Name: "import", Kind: horizon.KindPostgres,
		Config: horizon.SourceConfig{DSN: p.DSN, Query: p.Query, PasswordEnv: p.PasswordEnv}}
	if err := src.Validate(); err != nil {
		return nil, err
	}
	conn, err := db.ConnectSource(ctx, p.DSN, p.PasswordEnv, "DSN from --from-postgres")
	if err != nil {
		return nil, err
	}
	s := &postgresSource{cfg: p, conn: conn, sum: sha256.New()}
	if err := s.start(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

func (s *postgresSource) start(ctx context.Context) error {
	tx, err := s.conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return fmt.Errorf("source: begin read-only: %s", db.Scrub(s.cfg.DSN, err.Error()))
	}
	s.tx = tx
	// A read of a million rows outlasts any statement timeout meant for
	// one lookup; it is read-only, on the store's own database.
	if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = 0"); err != nil {
		return fmt.Errorf("source: %s", db.Scrub(s.cfg.DSN, err.Error()))
	}
	q := strings.TrimRight(strings.TrimSpace(s.cfg.Query), "; \n")
	probe, err := tx.Query(ctx, "SELECT * FROM ("+q+") AS source LIMIT 0")
	if err != nil {
		return fmt.Errorf("source query: %s", db.Scrub(s.cfg.DSN, err.Error()))
	}
	s.cols = map[string]bool{}
	for _, f := range probe.FieldDescriptions() {
		s.cols[f.Name] = true
	}
	probe.Close()
	if err := probe.Err(); err != nil {
		return fmt.Errorf("source query: %s", db.Scrub(s.cfg.DSN, err.Error()))
	}
	for _, c := range []string{"tenant_id", "operation_id", "response", "created_at", "status"} {
		if !s.cols[c] {
			return fmt.Errorf("source query: no column %s (it returns tenant_id, operation_id, payload or request_hash, response, created_at, status and optionally locked)", c)
		}
	}
	if !s.cols["payload"] && !s.cols["request_hash"] {
		return errors.New("source query: neither a payload nor a request_hash column")
	}
	col := func(name, cast string) string {
		if s.cols[name] {
			return name + "::" + cast
		}
		return "NULL::" + cast
	}
	sql := "SELECT tenant_id::text, operation_id::text, " + col("payload", "text") + ", response::text, created_at::timestamptz, status::text, " +
		col("locked", "boolean") + ", " + col("request_hash", "text") + " FROM (" + q + ") AS source"
	var args []any
	if s.cfg.Since != nil {
		sql += ` WHERE (created_at::timestamptz, tenant_id::text COLLATE "C", operation_id::text COLLATE "C") > ($1, $2 COLLATE "C", $3 COLLATE "C")`
		args = []any{s.cfg.Since.At, s.cfg.Since.Tenant, s.cfg.Since.OperationID}
	}
	if !s.cfg.Unordered {
		sql += ` ORDER BY created_at::timestamptz NULLS FIRST, tenant_id::text COLLATE "C", operation_id::text COLLATE "C"`
	}
	s.rows, err = tx.Query(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("source query: %s", db.Scrub(s.cfg.DSN, err.Error()))
	}
	return nil
}

func (s *postgresSource) Describe() string {
	return "postgres " + db.Describe(s.cfg.DSN)
}

func (s *postgresSource) Digest() string { return "sha256:" + hex.EncodeToString(s.sum.Sum(nil)) }

// flush adds the last row read to the digest.
func (s *postgresSource) flush() {
	s.sum.Write(s.pending)
	s.pending = s.pending[:0]
}

// digestBeforeLast is the digest of the rows read before the last one Next
// returned: what a plan read up to its cursor when the rows after it came
// next (the store's order puts them last).
func (s *postgresSource) digestBeforeLast() string {
	return "sha256:" + hex.EncodeToString(s.sum.Sum(nil))
}

func (s *postgresSource) Next(ctx context.Context) (Row, error) {
	if !s.rows.Next() {
		s.flush()
		s.rows.Close()
		if err := s.rows.Err(); err != nil {
			return Row{}, fmt.Errorf("source query: %s", db.Scrub(s.cfg.DSN, err.Error()))
		}
		return Row{}, io.EOF
	}
	s.n++
	// Scanned into values of the source's own (pgtype, []byte): no
	// pointer allocated a column, and the payload and response are read
	// once into the bytes the row keeps (a million rows a read).
	v := &s.scan
	v.payload, v.response = nil, nil
	if err := s.rows.Scan(&v.tenant, &v.op, &v.payload, &v.response, &v.created, &v.status, &v.locked, &v.reqHash); err != nil {
		return Row{}, fmt.Errorf("source row %d: %w", s.n, err)
	}
	// The digest covers every row as read, in order: each value
	// length-prefixed, NULL apart from empty. The row's bytes enter it at
	// the next call (digestBeforeLast: the rows before this one).
	s.flush()
	s.pending = appendText(s.pending, v.tenant)
	s.pending = appendText(s.pending, v.op)
	s.pending = appendBytes(s.pending, v.payload)
	s.pending = appendBytes(s.pending, v.response)
	s.pending = appendText(s.pending, v.status)
	s.pending = appendText(s.pending, v.reqHash)
	var created *time.Time
	if v.created.Valid {
		t := v.created.Time
		created = &t
		var at [64]byte
		s.pending = appendField(s.pending, t.UTC().AppendFormat(at[:0], time.RFC3339Nano))
	} else {
		s.pending = appendField(s.pending, nil)
	}
	locked := v.locked.Valid && v.locked.Bool
	var lb [5]byte
	s.pending = appendField(s.pending, strconv.AppendBool(lb[:0], locked))
	row := Row{Ref: "row " + strconv.Itoa(s.n), Tenant: v.tenant.String, OperationID: v.op.String, CreatedAt: created,
		Status: v.status.String, Locked: locked, RequestHash: v.reqHash.String, Payload: v.payload}
	if v.response != nil && string(v.response) != "null" {
		row.Response = v.response
	}
	return row, nil
}

// scanRow holds a source row's columns as Next scans them.
type scanRow struct {
	tenant, op, status, reqHash pgtype.Text
	payload, response           []byte
	created                     pgtype.Timestamptz
	locked                      pgtype.Bool
}

func appendText(b []byte, v pgtype.Text) []byte {
	if !v.Valid {
		return appendField(b, nil)
	}
	b = strconv.AppendInt(b, int64(len(v.String)), 10)
	b = append(b, ':')
	return append(b, v.String...)
}

func appendBytes(b []byte, v []byte) []byte {
	if v == nil {
		return appendField(b, nil)
	}
	return appendField(b, v)
}

func ptr(s string) *string { return &s }

// appendField appends v length-prefixed, or NULL (nil) as 0xff.
func appendField(b []byte, v []byte) []byte {
	if v == nil {
		return append(b, 0xff)
	}
	b = strconv.AppendInt(b, int64(len(v)), 10)
	b = append(b, ':')
	return append(b, v...)
}

func (s *postgresSource) Close() error {
	if s.rows != nil {
		s.rows.Close()
	}
	if s.tx != nil {
		_ = s.tx.Rollback(context.Background())
	}
	return s.conn.Close(context.Background())
}

// SourceError is an error of the store being read (its file, its database
// or its query), named by the source (Source.Describe): never one of the
// idem database's refusals, whatever its SQLSTATE (a 42501 of the store
// is the store's login, not the operator's).
type SourceError struct {
	Source string
	Err    error
}

func (e *SourceError) Error() string { return "the source " + e.Source + ": " + e.Err.Error() }

// Unwrap returns the source's own error.
func (e *SourceError) Unwrap() error { return e.Err }

// sourceErr names src in err (io.EOF and nil pass through).
func sourceErr(src Source, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	var se *SourceError
	if errors.As(err, &se) {
		return err
	}
	return &SourceError{Source: src.Describe(), Err: err}
}
