package importer

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/idem"
)

// Hash functions a store that kept only its own request hash may declare.
const (
	// SHA256Raw: SHA-256 of the request body's bytes as received.
	SHA256Raw = "sha256-raw"
	// SHA256SortedJSON: SHA-256 of the JSON with its keys sorted and no
	// whitespace (RFC 8785, what idemctl sends as a payload).
	SHA256SortedJSON = "sha256-sorted-json"
)

// Kind is what the import does with a row.
type Kind int

const (
	// Import: a finished operation, entered with its response.
	Import Kind = iota
	// Ambiguous: unfinished, locked or without a response: not imported,
	// listed for idemctl resolve.
	Ambiguous
	// Invalid: unreadable, a NULL or future created_at, a payload over the
	// limit, ids that break the identity rules.
	Invalid
)

// Verdict is a row's classification.
type Verdict struct {
	Kind   Kind
	Reason string
	Item   governance.EntryItem
	// CreatedAt is the row's original created_at (Import).
	CreatedAt time.Time
	// StoreHash is the store's own hash, hex (hash-only Import).
	StoreHash string
}

// Classify decides what happens to one row of class class, at now.
func Classify(r Row, class string, now time.Time) Verdict {
	bad := func(format string, a ...any) Verdict {
		return Verdict{Kind: Invalid, Reason: fmt.Sprintf(format, a...)}
	}
	if r.Problem != "" {
		return bad("%s", r.Problem)
	}
	if err := (idem.Identity{TenantID: r.Tenant, OperationID: r.OperationID}).Validate(); err != nil {
		return bad("identity: %v", err)
	}
	if r.CreatedAt == nil {
		return bad("created_at is NULL: its age, and so its replay horizon, is unknown")
	}
	if r.CreatedAt.After(now) {
		return bad("created_at %s is in the future", r.CreatedAt.UTC().Format(time.RFC3339))
	}
	switch {
	case r.Status != "finished":
		return Verdict{Kind: Ambiguous, Reason: fmt.Sprintf("unfinished in the old store (status %q)", r.Status)}
	case r.Locked:
		return Verdict{Kind: Ambiguous, Reason: "still locked in the old store (a worker may be running it)"}
	case r.Response == nil || string(bytes.TrimSpace(r.Response)) == "null":
		// JSON null is no saved response either (the database refuses it too).
		return Verdict{Kind: Ambiguous, Reason: "finished without a saved response"}
	}
	if !json.Valid(r.Response) {
		return bad("the response is not JSON")
	}
	if idem.HasNULEscape(r.Response) {
		return bad("the response holds U+0000, which PostgreSQL's jsonb cannot store")
	}
	v := Verdict{Kind: Import, CreatedAt: *r.CreatedAt}
	v.Item = governance.EntryItem{TenantID: r.Tenant, OperationID: r.OperationID, Class: class,
		Response: json.RawMessage(r.Response), Evidence: "imported from " + r.Ref}
	if r.Payload == nil {
		h := strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(r.RequestHash, `\x`), "sha256:"))
		if b, err := hex.DecodeString(h); err != nil || len(b) != 32 {
			return bad("neither a payload nor a request hash of 64 hex digits")
		}
		v.StoreHash = h
		return v
	}
	canon, hash, err := idem.Canonicalize(r.Payload, idem.PayloadLimits{})
	if err != nil {
		return bad("payload: %v", err)
	}
	if idem.HasNULEscape(canon) {
		return bad("the payload holds U+0000, which PostgreSQL's jsonb cannot store")
	}
	v.Item.Payload, v.Item.PayloadHash = string(canon), hash
	return v
}

// Counts are what a plan read of its source.
type Counts struct {
	Read      int `json:"read"`
	ToImport  int `json:"to_import"`
	HashOnly  int `json:"hash_only"`
	Ambiguous int `json:"ambiguous"`
	Invalid   int `json:"invalid"`
	// NotAfterSince counts the rows at or before ReadFrom (--since less
	// --since-overlap), which the plan skips: the rows before the cursor
	// less the overlap. A file is read whole, so they are counted here; a
	// store's query starts after ReadFrom, so it gives none. The overlap's
	// rows are read again (Read), and what the inbox holds is skipped.
	NotAfterSince int `json:"not_after_since,omitempty"`
	// Since is the plan's --since.
	Since string `json:"since,omitempty"`
	// ReadFrom is where the plan read from: Since less the overlap
	// (ReadFrom); the run reads the source again after it.
	ReadFrom string `json:"read_from,omitempty"`
}

// PlanOptions are what a planner states besides the source.
type PlanOptions struct {
	Class, Operator, Reason string
	// Contract and Correction are what the plan cites, as a record plan
	// does: a money class needs the business contract the approver checks
	// the imported amounts against, a class with a SQL effect who wrote the
	// effects of the imported operations (the import does not run them).
	Contract, Correction string
	// HashFunction is the store's declared hash function (SHA256Raw,
	// SHA256SortedJSON), "" when undeclared.
	HashFunction string
	// Since is the cursor a previous import printed: the plan reads the
	// rows after ReadFrom(Since, SinceOverlap), so that a row stamped
	// before the cursor but committed after that import read the store is
	// not lost; what the inbox already holds is skipped at the run. Plan
	// opens the source after that ReadFrom (Counts.ReadFrom is what the run
	// opens it with again).
	Since *Cursor
	// SinceOverlap is how far before Since the plan reads again: 0 (or
	// less) not at all; DefaultSinceOverlap is the CLI flag's default,
	// which a caller passes itself.
	SinceOverlap time.Duration
	// BatchSize is how many items a call sends (default 10000; on Citus).
	BatchSize int
	// ChunkRows is how many staged rows a chunk of the run enters in one
	// transaction (default 50000).
	ChunkRows int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Progress, when set, is called every ProgressEvery (default 2s) with
	// the counts so far, and once at the end of the read.
	Progress      func(Counts)
	ProgressEvery time.Duration
}

// Sinks receive the rows that are not imported, one JSON object a line:
// Ambiguous in idemctl resolve's input format, Invalid with the reason.
type Sinks struct {
	Ambiguous, Invalid io.Writer
}

// Result is a planned import.
type Result struct {
	// Plan is the sealed plan; ID 0 when there was nothing to import.
	Plan   governance.EntryPlan
	Counts Counts
	// Cursor is the last row read (nil when none had a usable created_at).
	Cursor *Cursor
	// AmbiguousBeforeCursor counts the ambiguous rows at or before Cursor;
	// a rerun with --since Cursor reads again those within its overlap
	// (AmbiguousRereadByDefault of them with DefaultSinceOverlap; all with
	// an overlap of AmbiguousOverlapForAll or more).
	AmbiguousBeforeCursor    int
	AmbiguousRereadByDefault int
	AmbiguousOverlapForAll   time.Duration
	Digest                   string
}

// ErrNothingToImport: the source held no row to import (after --since).
var ErrNothingToImport = errors.New("nothing to import")

// TxBeginner starts transactions; a pool or a connection.
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// beginReading starts a transaction that lasts as long as a read of the
// source (a plan, an approval, a run that reads it again): it waits on the
// source between batches (a sort of a million rows before the first), so
// neither statement_timeout nor idle_in_transaction_session_timeout applies
// to it. The caller defers the returned rollback.
func beginReading(ctx context.Context, db TxBeginner) (pgx.Tx, func(), error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	rollback := func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }
	if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = 0; SET LOCAL idle_in_transaction_session_timeout = 0"); err != nil {
		rollback()
		return nil, nil, err
	}
	return tx, rollback, nil
}

// ambiguousLine is a line of idemctl resolve's input.
type ambiguousLine struct {
	Tenant         string          `json:"tenant"`
	OperationID    string          `json:"operation_id"`
	Class          string          `json:"class"`
	Payload        json.RawMessage `json:"payload"`
	FirstAttemptAt *time.Time      `json:"first_attempt_at,omitempty"`
	Note           string          `json:"note"`
}

type invalidLine struct {
	Ref         string `json:"ref"`
	Tenant      string `json:"tenant,omitempty"`
	OperationID string `json:"operation_id,omitempty"`
	Outcome     string `json:"outcome"`
	Reason      string `json:"reason"`
}

// Plan asks the database first, in one round trip, whether the class
// exists (ErrUnknownClass) and needs what the plan does not cite
// (idem.entry_citation_problem: ErrRefused), the source not opened; then opens the source (open, after ReadFrom(o.Since, o.SinceOverlap):
// the one place that decides where a plan reads from; the opener's error
// as it is when it cannot), reads it to its end and stores an import plan of its
// finished rows, in one transaction (idem.import_plan_begin, _add by
// batches, _seal with the digest, the counts and the cursor): nothing
// enters until another person approves it. With nothing to import it
// stores nothing and returns ErrNothingToImport with the counts.
func Plan(ctx context.Context, db TxBeginner, open Opener, o PlanOptions, sinks Sinks) (Result, error) {
	if o.BatchSize <= 0 {
		o.BatchSize = 10000
	}
	if o.ChunkRows <= 0 {
		o.ChunkRows = 50000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 2 * time.Second
	}
	readFrom := ReadFrom(o.Since, o.SinceOverlap)
	// The plan's transaction lasts as long as the source's read (and its
	// seal counts every item).
	tx, rollback, err := beginReading(ctx, db)
	if err != nil {
		return Result{}, err
	}
	defer rollback()
	// The class and what the plan cites, before the source is opened (the
	// seal checks them again): an unknown class, or a money class without
	// its contract, reads nothing.
	var problem *string
	var unknown bool
	if err := tx.QueryRow(ctx, `SELECT idem.entry_citation_problem('import', $1, $2, $3),
		NOT EXISTS (SELECT 1 FROM idem.op_class WHERE name = $1)`, o.Class, o.Contract, o.Correction).
		Scan(&problem, &unknown); err != nil {
		return Result{}, fmt.Errorf("plan import: %w", governance.MapError(err))
	}
	if unknown {
		return Result{}, fmt.Errorf("plan import: --class: %w: %s (idemctl class list shows them); nothing read", governance.ErrUnknownClass, o.Class)
	}
	if problem != nil {
		return Result{}, fmt.Errorf("plan import: %w: %s; nothing read", governance.ErrRefused, *problem)
	}
	src, err := open(ctx, readFrom, true)
	if err != nil {
		return Result{}, err
	}
	defer src.Close()
	var hf *string
	if o.HashFunction != "" {
		hf = &o.HashFunction
	}
	var id int64
	if err := tx.QueryRow(ctx, "SELECT (idem.import_plan_begin($1, $2, $3, $4, $5, $6)).id", src.Describe(), hf, o.Operator, o.Reason,
		o.Contract, o.Correction).Scan(&id); err != nil {
		return Result{}, fmt.Errorf("plan import: %w", governance.MapError(err))
	}
	// On Citus a plan keeps an item a row; elsewhere one digest of them all.
	var citus bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL").Scan(&citus); err != nil {
		return Result{}, fmt.Errorf("plan import: %w", err)
	}
	p := &planner{ctx: ctx, tx: tx, id: id, o: o, sinks: sinks, now: o.Now(), src: src, readFrom: readFrom}
	if o.Since != nil {
		p.counts.Since = o.Since.String()
		p.counts.ReadFrom = readFrom.String()
	}
	if citus {
		err = p.read()
	} else {
		err = p.stage()
	}
	if err != nil {
		return Result{Counts: p.counts}, err
	}
	res := Result{Counts: p.counts, Cursor: p.cursor, Digest: src.Digest()}
	for _, at := range p.ambiguousAt {
		if res.Cursor == nil || res.Cursor.Before(at) {
			continue
		}
		res.AmbiguousBeforeCursor++
		if Rereads(*res.Cursor, DefaultSinceOverlap, at) {
			res.AmbiguousRereadByDefault++
		}
		if d := overlapToReread(*res.Cursor, at); d > res.AmbiguousOverlapForAll {
			res.AmbiguousOverlapForAll = d
		}
	}
	if p.counts.ToImport == 0 {
		return res, ErrNothingToImport
	}
	if p.through == "" {
		p.through = res.Digest
	}
	counts, _ := json.Marshal(sourceCounts{Counts: p.counts, Through: p.through})
	var cursor *string
	if p.cursor != nil {
		cursor = ptr(p.cursor.String())
	}
	var plan governance.EntryPlan
	if !citus {
		plan, err = governance.OneEntry(tx.Query(ctx, "SELECT to_jsonb(p) FROM idem.import_plan_seal_stage($1, $2, $3, $4, $5, $6) p",
			id, res.Digest, string(counts), cursor, o.Class, o.ChunkRows))
	} else {
		plan, err = governance.OneEntry(tx.Query(ctx, "SELECT to_jsonb(p) FROM idem.import_plan_seal($1, $2, $3, $4) p", id, res.Digest, string(counts), cursor))
	}
	if err != nil {
		return res, fmt.Errorf("seal import plan %d: %w", id, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("commit import plan %d: %w", id, err)
	}
	res.Plan = plan
	return res, nil
}

// overlapToReread is the least whole minute of --since-overlap after which
// a rerun from cursor reads the row at again (a minute more than the gap,
// so that the row at the boundary is in).
func overlapToReread(cursor, at Cursor) time.Duration {
	d := cursor.At.Sub(at.At)
	return (d/time.Minute + 1) * time.Minute
}

type planner struct {
	ctx         context.Context
	tx          pgx.Tx
	id          int64
	o           PlanOptions
	sinks       Sinks
	now         time.Time
	counts      Counts
	cursor      *Cursor
	batch       batch
	ambiguousAt []Cursor
	readFrom    *Cursor // ReadFrom(o.Since, o.SinceOverlap)
	src         Source
	// through is the source's digest up to the cursor (the rows after it
	// came last): what the run reads again to see that nothing changed.
	through string
	// staging: the Import verdicts go to the stage (stage), not to batch.
	staging bool
}

// sourceCounts are what the plan keeps of its read of the source.
type sourceCounts struct {
	Counts
	// Through is "sha256:<hex>" of the source's rows up to the plan's
	// cursor, as the source digests them (a postgres source; a file's is
	// its whole digest).
	Through string `json:"digest_through_cursor,omitempty"`
}

// batch holds the items idem.import_plan_add takes next, as its parallel
// arrays: no payload and no response, their fingerprint instead (nil: NULL).
type batch struct {
	tenant, operation, evidence []string
	storeHash                   []*string
	createdAt                   []time.Time
	fingerprint                 [][]byte
}

func (b *batch) add(v Verdict) {
	b.tenant = append(b.tenant, v.Item.TenantID)
	b.operation = append(b.operation, v.Item.OperationID)
	b.evidence = append(b.evidence, v.Item.Evidence)
	b.createdAt = append(b.createdAt, v.CreatedAt)
	var sh *string
	if v.StoreHash != "" {
		sh = &v.StoreHash
	}
	b.storeHash = append(b.storeHash, sh)
	fp := v.Fingerprint()
	b.fingerprint = append(b.fingerprint, fp[:])
}

func (b *batch) len() int { return len(b.tenant) }

func (b *batch) reset() { *b = batch{} }

// read plans an item a row (on Citus): each Import verdict goes into the
// batches idem.import_plan_add takes.
func (p *planner) read() error {
	chunks := p.classified()
	defer chunks.stop()
	last := time.Now()
	for c := range chunks.out {
		if c.err != nil {
			return c.err
		}
		for i, r := range c.rows {
			if err := p.row(r, c.verdicts[i]); err != nil {
				return err
			}
			if p.o.Progress != nil && p.counts.Read%1000 == 0 && time.Since(last) >= p.o.ProgressEvery {
				last = time.Now()
				p.o.Progress(p.counts)
			}
		}
	}
	if err := p.flush(); err != nil {
		return err
	}
	if p.o.Progress != nil {
		p.o.Progress(p.counts)
	}
	return nil
}

// classifiedChunk is a run of the source's rows with their verdicts.
type classifiedChunk struct {
	rows     []Row
	verdicts []Verdict
	err      error
}

// classifier reads the source and classifies its rows by chunks, one chunk
// ahead of its reader, on a goroutine of its own.
type classifier struct {
	out  chan classifiedChunk
	done chan struct{}
}

func (c *classifier) stop() {
	close(c.done)
	for range c.out {
	}
}

func (p *planner) classified() *classifier {
	c := &classifier{out: make(chan classifiedChunk, 2), done: make(chan struct{})}
	marker, _ := p.src.(interface{ digestBeforeLast() string })
	go func() {
		defer close(c.out)
		for eof := false; !eof; {
			chunk := classifiedChunk{rows: make([]Row, 0, chunkRows)}
			for len(chunk.rows) < chunkRows {
				r, err := p.src.Next(p.ctx)
				err = sourceErr(p.src, err)
				if err == io.EOF {
					eof = true
					break
				}
				if err != nil {
					chunk.err, eof = err, true
					break
				}
				// The first row after "now" is the first after the cursor
				// (the store's order puts them last).
				if marker != nil && p.through == "" && r.CreatedAt != nil && r.CreatedAt.After(p.now) {
					p.through = marker.digestBeforeLast()
				}
				chunk.rows = append(chunk.rows, r)
			}
			chunk.verdicts = make([]Verdict, len(chunk.rows))
			classifyAll(chunk.rows, p.o.Class, p.now, p.beforeSince, chunk.verdicts)
			select {
			case c.out <- chunk:
			case <-c.done:
				return
			}
		}
	}()
	return c
}

// beforeSince: a row --since skips (not read, not classified).
func (p *planner) beforeSince(r Row) bool {
	return r.CreatedAt != nil && p.readFrom != nil && r.Problem == "" &&
		!p.readFrom.Before(Cursor{At: *r.CreatedAt, Tenant: r.Tenant, OperationID: r.OperationID})
}

func (p *planner) row(r Row, v Verdict) error {
	if p.beforeSince(r) {
		p.counts.NotAfterSince++
		return nil
	}
	p.counts.Read++
	var at *Cursor
	if r.CreatedAt != nil && !r.CreatedAt.After(p.now) && r.Problem == "" {
		at = &Cursor{At: *r.CreatedAt, Tenant: r.Tenant, OperationID: r.OperationID}
		if p.cursor == nil || p.cursor.Before(*at) {
			p.cursor = at
		}
	}
	switch v.Kind {
	case Invalid:
		p.counts.Invalid++
		return writeLine(p.sinks.Invalid, invalidLine{Ref: r.Ref, Tenant: r.Tenant, OperationID: r.OperationID, Outcome: "invalid", Reason: v.Reason})
	case Ambiguous:
		p.counts.Ambiguous++
		if at != nil {
			p.ambiguousAt = append(p.ambiguousAt, *at)
		}
		note := "import: " + v.Reason + " (" + r.Ref + ")"
		if r.Payload == nil {
			note += "; the store kept no payload: resolve cannot answer it"
		}
		return writeLine(p.sinks.Ambiguous, ambiguousLine{Tenant: r.Tenant, OperationID: r.OperationID, Class: p.o.Class,
			Payload: json.RawMessage(orNull(r.Payload)), FirstAttemptAt: r.CreatedAt, Note: note})
	}
	p.counts.ToImport++
	if v.StoreHash != "" {
		p.counts.HashOnly++
	}
	if p.staging {
		return nil
	}
	p.batch.add(v)
	if p.batch.len() >= p.o.BatchSize {
		return p.flush()
	}
	return nil
}

func orNull(b []byte) []byte {
	if b == nil {
		return []byte("null")
	}
	return b
}

func (p *planner) flush() error {
	if p.batch.len() == 0 {
		return nil
	}
	b := &p.batch
	if _, err := p.tx.Exec(p.ctx, "SELECT idem.import_plan_add($1, $2, $3, $4, $5, $6, $7, $8)", p.id, p.o.Class,
		b.tenant, b.operation, b.evidence, b.createdAt, b.storeHash, b.fingerprint); err != nil {
		return fmt.Errorf("plan import: %w", governance.MapError(err))
	}
	b.reset()
	return nil
}

func writeLine(w io.Writer, v any) error {
	if w == nil {
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(raw, '\n'))
	return err
}

// Outcomes counts the items of an import plan by outcome (entered,
// skipped, quarantined, refused; pending before the run, and while a
// staged plan runs, the rows of the chunks not committed yet). The run writes
// an outcome only for the items it did not enter (and a plan with an items
// digest an item row only for those).
func Outcomes(ctx context.Context, db governance.DBTX, id int64) (map[string]int, error) {
	rows, err := db.Query(ctx, `SELECT o.outcome, o.n FROM idem.entry_plan p,
			LATERAL (SELECT coalesce(sum(c.entered), 0) AS n FROM idem.import_chunk c WHERE c.plan_id = p.id AND p.state = 'running') r,
			LATERAL (SELECT e.outcome, count(*) AS n FROM idem.entry_item e WHERE e.plan_id = p.id AND e.outcome IS NOT NULL GROUP BY 1
			         UNION ALL
			         SELECT 'entered', r.n WHERE p.state = 'running'
			         UNION ALL
			         SELECT CASE p.state WHEN 'done' THEN 'entered' ELSE 'pending' END,
			                p.items - r.n - (SELECT count(e.outcome) FROM idem.entry_item e WHERE e.plan_id = p.id)) o
		WHERE p.id = $1 AND o.n > 0`, id)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	var k string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&k, &n}, func() error { out[k] = n; return nil })
	return out, err
}
