package importer

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemctl/idemctl/governance"
)

// Fingerprint is what an import plan keeps of an item instead of its
// payload and response: sha256 over the tenant and operation ids, the
// payload hash or the store's own hash, the response text and created_at
// (microseconds since the epoch), each text length-prefixed and "-" for
// none. idem.import_fingerprint computes the same bytes from the rows the
// run stages.
func Fingerprint(tenant, operation, payloadHash, storeHash string, response []byte, createdAt time.Time) [32]byte {
	h := sha256.New()
	field := func(s string, present bool) {
		if !present {
			h.Write([]byte("-"))
			return
		}
		h.Write(strconv.AppendInt(nil, int64(len(s)), 10))
		h.Write([]byte(":"))
		h.Write([]byte(s))
	}
	field(tenant, true)
	field(operation, true)
	field(payloadHash, payloadHash != "")
	field(storeHash, storeHash != "")
	field(string(response), response != nil)
	h.Write(strconv.AppendInt(nil, createdAt.UnixMicro(), 10))
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// Fingerprint is the fingerprint of an Import verdict's item.
func (v Verdict) Fingerprint() [32]byte {
	return Fingerprint(v.Item.TenantID, v.Item.OperationID, v.Item.PayloadHash, v.StoreHash, v.Item.Response, v.CreatedAt)
}

// ErrSourceChanged: the source an approval or a run on Citus reads again
// is not the one planned (another kind of source, a file whose digest
// differs, another database, an identity read twice). The
// database refuses any other difference itself (IX343: a row not planned,
// different, or missing).
var ErrSourceChanged = errors.New("the source changed since the plan")

// ErrNoSource: the run of a plan that is not staged (on Citus) reads its
// source again, and none was given.
var ErrNoSource = errors.New("the run of this plan reads its source again")

// Opener opens an import's source, reading after since (nil: from its
// start): Plan opens it where ReadFrom says, Run again where the plan read
// from. A plan, and a run of a plan that keeps one digest of its items,
// need the rows in the store's order (ordered); a run of one that keeps an
// item a row needs no order (PostgresSource.Unordered). A file is read
// whole whatever since says (the plan skips the rows before it as it reads).
type Opener func(ctx context.Context, since *Cursor, ordered bool) (Source, error)

// File is the Opener of an NDJSON export (OpenNDJSON).
func File(path string) Opener {
	return func(context.Context, *Cursor, bool) (Source, error) { return OpenNDJSON(path) }
}

// Opener is the Opener of the store p names; its Since and Unordered are
// set by each call.
func (p PostgresSource) Opener() Opener {
	return func(ctx context.Context, since *Cursor, ordered bool) (Source, error) {
		p.Since, p.Unordered = since, !ordered
		return p.Open(ctx)
	}
}

// Run runs an approved import plan in one transaction without a statement
// timeout: it reads the plan's source again (open, after the plan's
// --since), copies the rows the plan imports into the stage
// idem.import_stage_open made, and calls idem.entry_plan_run, which enters
// them only if they are exactly the planned items. A source that cannot be
// opened, or a file that is not the planned one, enters nothing. The
// login, the plan's kind and its state are checked before the source is
// read (idem.import_plan_ready).
//
// A staged plan (idem.import_plan_seal_stage, every plan made off Citus)
// runs from its stage instead (runStaged) and open is not called (it may
// be nil): its approval compared the source with the stage, and the stage
// is what enters. The rows enter by chunks, each its own transaction, on
// up to as many connections of a pool as the machine has cores; a run
// that stopped resumes where it stopped.
func Run(ctx context.Context, db TxBeginner, id int64, operator string, open Opener) (governance.EntryPlan, error) {
	// The login's right, the plan's kind and state, before the source is
	// read (idem.import_plan_ready; the run's functions check again).
	plan, err := inTx(ctx, db, func(tx pgx.Tx) (governance.EntryPlan, error) {
		return governance.OneEntry(tx.Query(ctx, "SELECT to_jsonb(p) FROM idem.import_plan_ready($1, 'run') p", id))
	})
	if err != nil {
		return governance.EntryPlan{}, err
	}
	if plan.Staged {
		return runStaged(ctx, db, plan, operator, runtime.GOMAXPROCS(0))
	}
	if open == nil {
		return governance.EntryPlan{}, fmt.Errorf("import plan %d: %w (it keeps a fingerprint an item, on Citus): give its source as planned; nothing entered",
			id, ErrNoSource)
	}
	return runReading(ctx, db, id, operator, open)
}

// runReading runs a plan that keeps a fingerprint an item (on Citus) or
// one digest of its items (sealed before staged plans): it reads the
// source again and stages it in a temporary table, in one transaction.
func runReading(ctx context.Context, db TxBeginner, id int64, operator string, open Opener) (governance.EntryPlan, error) {
	tx, rollback, err := beginReading(ctx, db)
	if err != nil {
		return governance.EntryPlan{}, err
	}
	defer rollback()
	plan, err := governance.OneEntry(tx.Query(ctx, "SELECT to_jsonb(p) FROM idem.import_stage_open($1) p", id))
	if err != nil {
		return governance.EntryPlan{}, err
	}
	st, err := newStager(ctx, plan)
	if err != nil {
		return governance.EntryPlan{}, err
	}
	src, err := open(ctx, st.since, plan.ItemsDigest != nil)
	if err != nil {
		return governance.EntryPlan{}, fmt.Errorf("import plan %d: the source cannot be read again: %w; nothing entered", id, err)
	}
	defer src.Close()
	st.src = src
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"pg_temp", "idem_import_stage"},
		[]string{"tenant_id", "operation_id", "payload", "payload_hash", "response", "created_at", "store_hash", "evidence"}, st); err != nil {
		if st.err != nil {
			// the source's error, named: not the idem database's
			return governance.EntryPlan{}, fmt.Errorf("import plan %d: read the source again: %w; nothing entered", id, st.err)
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return governance.EntryPlan{}, fmt.Errorf("import plan %d: %w: an identity read twice; nothing entered", id, ErrSourceChanged)
		}
		return governance.EntryPlan{}, fmt.Errorf("import plan %d: read the source again: %w; nothing entered", id, governance.MapError(err))
	}
	if err := samePlannedSource(plan, src); err != nil {
		return governance.EntryPlan{}, fmt.Errorf("import plan %d: %w; nothing entered", id, err)
	}
	p, err := governance.RunEntry(ctx, tx, id, operator)
	if err != nil {
		return governance.EntryPlan{}, err
	}
	return p, tx.Commit(ctx)
}

// stager feeds the COPY into the stage: the source's rows the plan imports
// (after its --since, up to its cursor), classified as the plan did.
type stager struct {
	ctx         context.Context
	src         Source
	since, upto *Cursor
	class       string
	now         time.Time
	vals        []any
	values      func([]any, *Verdict) []any // stageValues unless set
	err         error
	chunk       []Row
	verdicts    []Verdict
	next        int
	eof         bool
}

func newStager(ctx context.Context, plan governance.EntryPlan) (*stager, error) {
	var counts struct {
		Classes map[string]int `json:"classes"`
		Source  Counts         `json:"source"`
	}
	if err := json.Unmarshal(plan.Counts, &counts); err != nil {
		return nil, fmt.Errorf("import plan %d: its counts: %w", plan.ID, err)
	}
	st := &stager{ctx: ctx, now: time.Now()}
	for c := range counts.Classes {
		st.class = c
	}
	if from := cmp.Or(counts.Source.ReadFrom, counts.Source.Since); from != "" {
		c, err := ParseCursor(from)
		if err != nil {
			return nil, fmt.Errorf("import plan %d: its --since: %w", plan.ID, err)
		}
		st.since = &c
	}
	if plan.Cursor != nil {
		c, err := ParseCursor(*plan.Cursor)
		if err != nil {
			return nil, fmt.Errorf("import plan %d: its cursor: %w", plan.ID, err)
		}
		st.upto = &c
	}
	return st, nil
}

func (s *stager) Next() bool {
	for {
		for s.next < len(s.chunk) {
			i := s.next
			s.next++
			if v := &s.verdicts[i]; v.Kind == Import && !s.outside(s.chunk[i]) {
				if s.values != nil {
					s.vals = s.values(s.vals, v)
				} else {
					s.vals = stageValues(s.vals, v)
				}
				return true
			}
		}
		if s.eof {
			return false
		}
		s.fill()
	}
}

// fill reads the next chunk of rows and classifies it.
func (s *stager) fill() {
	s.chunk, s.next = s.chunk[:0], 0
	if s.verdicts == nil {
		s.verdicts = make([]Verdict, chunkRows)
	}
	for len(s.chunk) < chunkRows {
		r, err := s.src.Next(s.ctx)
		err = sourceErr(s.src, err)
		if err == io.EOF {
			s.eof = true
			break
		}
		if err != nil {
			s.err, s.eof = err, true
			s.chunk = s.chunk[:0]
			return
		}
		s.chunk = append(s.chunk, r)
	}
	classifyAll(s.chunk, s.class, s.now, s.outside, s.verdicts)
}

// outside: a row the plan did not read (unreadable, at or before its
// --since, after its cursor).
func (s *stager) outside(r Row) bool {
	if r.Problem != "" || r.CreatedAt == nil {
		return true
	}
	at := Cursor{At: *r.CreatedAt, Tenant: r.Tenant, OperationID: r.OperationID}
	return (s.since != nil && !s.since.Before(at)) || (s.upto != nil && s.upto.Before(at))
}

// stageValues are v's values of stageColumns, into dst (reused: the COPY
// encodes a row before it asks for the next); a NULL is nil.
func stageValues(dst []any, v *Verdict) []any {
	var payload, payloadHash, storeHash any
	if v.StoreHash != "" {
		storeHash = v.StoreHash
	} else {
		payload, payloadHash = v.Item.Payload, v.Item.PayloadHash
	}
	return append(dst[:0], v.Item.TenantID, v.Item.OperationID, payload, payloadHash, []byte(v.Item.Response), v.CreatedAt, storeHash,
		v.Item.Evidence)
}

// checkValues are stageValues without the payload (checkColumns).
func checkValues(dst []any, v *Verdict) []any {
	var payloadHash, storeHash any
	if v.StoreHash != "" {
		storeHash = v.StoreHash
	} else {
		payloadHash = v.Item.PayloadHash
	}
	return append(dst[:0], v.Item.TenantID, v.Item.OperationID, payloadHash, []byte(v.Item.Response), v.CreatedAt, storeHash,
		v.Item.Evidence)
}

func (s *stager) Values() ([]any, error) { return s.vals, nil }

func (s *stager) Err() error { return s.err }

// chunkRows is how many rows are read before they are classified together.
const chunkRows = 2048

// classifyAll classifies rows (Classify: canonical text and hash of each
// payload) over the machine's cores, into out in the rows' order; a row
// skip says so is left alone.
func classifyAll(rows []Row, class string, now time.Time, skip func(Row) bool, out []Verdict) {
	workers := runtime.GOMAXPROCS(0)
	per := (len(rows) + workers - 1) / workers
	if per < 64 {
		per = 64
	}
	var wg sync.WaitGroup
	for lo := 0; lo < len(rows); lo += per {
		hi := min(lo+per, len(rows))
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				if skip == nil || !skip(rows[i]) {
					out[i] = Classify(rows[i], class, now)
				} else {
					out[i] = Verdict{Kind: Invalid, Reason: "not read"}
				}
			}
		}(lo, hi)
	}
	wg.Wait()
}
