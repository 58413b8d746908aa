package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/recovery"
)

// IntakeOutcome is what intake says of one message of a source.
type IntakeOutcome string

// Intake outcomes. Absent, Conflicting and NoPayload messages go to the
// batch; the others do not.
const (
	// Present: the inbox holds the identity with the same payload (and class).
	Present IntakeOutcome = "present"
	// Absent: the inbox never recorded the identity.
	Absent IntakeOutcome = "absent"
	// Conflicting: the inbox holds the identity with another payload or class.
	Conflicting IntakeOutcome = "conflicting"
	// NoPayload: the identity is absent and the source carries no payload:
	// the line says so, and resolve refuses it until someone fills it in.
	NoPayload IntakeOutcome = "no_payload"
	// Unchecked: the inbox holds the identity, the source carries no payload
	// to compare it with.
	Unchecked IntakeOutcome = "unchecked"
	// Unreadable: the message's identity or payload is invalid.
	Unreadable IntakeOutcome = "invalid"
)

// IntakeOutcomes lists every outcome in the summary's order.
var IntakeOutcomes = []IntakeOutcome{Present, Absent, Conflicting, NoPayload, Unchecked, Unreadable}

// maxIntakeProblems bounds the invalid messages a summary names.
const maxIntakeProblems = 20

// IntakeConfig is one intake run.
type IntakeConfig struct {
	// Source is the replay source's name (idemctl horizon source list).
	Source string
	// Class is the class of the source's operations.
	Class    string
	Operator string
	// BatchSize is the identities per lookup (DefaultBatchSize when 0).
	BatchSize int
	Limits    idem.PayloadLimits
	// Timeout bounds the reading of the source (DefaultIntakeTimeout when
	// 0): a stream that stops answering must not hang the run.
	Timeout time.Duration
	// TenantPtr and OpPtr are JSON Pointers into the message's body that
	// give the identity when the source's headers (or columns) lack it.
	TenantPtr, OpPtr string
}

// DefaultIntakeTimeout bounds an intake's reading of its source.
const DefaultIntakeTimeout = 10 * time.Minute

// IntakeSummary is what an intake run read and wrote.
type IntakeSummary struct {
	Source   string                  `json:"source"`
	Kind     horizon.Kind            `json:"kind"`
	Class    string                  `json:"class"`
	Messages int64                   `json:"messages"`
	Counts   map[IntakeOutcome]int64 `json:"counts"`
	// Lines is how many lines the batch holds.
	Lines int64 `json:"lines"`
	// Problems names the first invalid messages and why.
	Problems    []string  `json:"problems,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
	AuditID     int64     `json:"audit_id,omitempty"`
	Interrupted bool      `json:"interrupted,omitempty"`
}

// intake is the state of one Intake run.
type intake struct {
	cfg          IntakeConfig
	tenantT, opT []string
	pr           pointerReader
	pool         *pgxpool.Pool
	out          *BatchWriter
	sum          IntakeSummary
	pending      []horizon.Message
}

// Intake reads every message the source holds and writes to out, as a
// resolve batch, each one whose identity the inbox does not hold (absent) or
// holds with another payload or class (conflicting). Messages are looked up
// in batches; nothing is kept beyond one batch. The run is recorded in the
// audit log (action intake.run).
func Intake(ctx context.Context, pool *pgxpool.Pool, cfg IntakeConfig, out *BatchWriter) (IntakeSummary, error) {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultIntakeTimeout
	}
	if cfg.Class == "" {
		return IntakeSummary{}, fmt.Errorf("%w: intake needs the class of the source's operations (--class)", ErrInvalidMapping)
	}
	in := &intake{cfg: cfg, pool: pool, out: out}
	for _, p := range []struct {
		flag, ptr string
		dst       *[]string
	}{{"--tenant-ptr", cfg.TenantPtr, &in.tenantT}, {"--op-ptr", cfg.OpPtr, &in.opT}} {
		if p.ptr == "" {
			continue
		}
		t, err := parsePointer(p.ptr)
		if err != nil {
			return IntakeSummary{}, fmt.Errorf("%w: %s: %v", ErrInvalidMapping, p.flag, err)
		}
		*p.dst = t
	}
	src, err := horizon.FindSource(ctx, pool, cfg.Source)
	if err != nil {
		return IntakeSummary{}, err
	}
	if _, err := recovery.CheckPrimary(ctx, pool); err != nil {
		return IntakeSummary{}, err
	}
	in.sum = IntakeSummary{Source: src.Name, Kind: src.Kind, Class: cfg.Class,
		Counts: map[IntakeOutcome]int64{}, StartedAt: time.Now()}
	readCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	runErr := horizon.ReadMessages(readCtx, src, func(ctx context.Context, m horizon.Message) error {
		in.sum.Messages++
		in.pending = append(in.pending, m)
		if len(in.pending) < cfg.BatchSize {
			return nil
		}
		return in.flush(ctx)
	})
	if runErr != nil && readCtx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		runErr = fmt.Errorf("reading source %s took longer than %s: %w", src.Name, cfg.Timeout, runErr)
	}
	if runErr == nil {
		runErr = in.flush(ctx)
	}
	if runErr == nil {
		runErr = out.Flush()
	}
	in.sum.Interrupted = runErr != nil
	in.sum.Lines = out.Lines()
	in.sum.FinishedAt = time.Now()
	id, err := in.record(context.WithoutCancel(ctx), runErr)
	in.sum.AuditID = id
	if runErr != nil {
		return in.sum, runErr
	}
	if err != nil {
		return in.sum, &RecordError{Err: err}
	}
	return in.sum, nil
}

// checked is a pending message made ready for the lookup.
type checked struct {
	m         horizon.Message
	canonical []byte
	hash      string
}

// flush looks the pending messages up and writes the batch lines.
func (in *intake) flush(ctx context.Context) error {
	var ready []checked
	for _, m := range in.pending {
		c, problem := in.check(m)
		if problem != "" {
			in.count(Unreadable)
			if len(in.sum.Problems) < maxIntakeProblems {
				in.sum.Problems = append(in.sum.Problems, m.At+": "+problem)
			}
			continue
		}
		ready = append(ready, c)
	}
	in.pending = in.pending[:0]
	if len(ready) == 0 {
		return nil
	}
	tenants, ops := make([]string, len(ready)), make([]string, len(ready))
	for i, c := range ready {
		tenants[i], ops[i] = c.m.Tenant, c.m.OperationID
	}
	found, err := lookup(ctx, in.pool, tenants, ops, false)
	if err != nil {
		return err
	}
	for i, c := range ready {
		if err := in.decide(c, found[i]); err != nil {
			return err
		}
	}
	return nil
}

// check validates a message's identity and canonicalises its payload.
func (in *intake) check(m horizon.Message) (checked, string) {
	if m.Problem != "" {
		return checked{}, m.Problem
	}
	for _, p := range []struct {
		dst    *string
		tokens []string
		ptr    string
	}{{&m.Tenant, in.tenantT, in.cfg.TenantPtr}, {&m.OperationID, in.opT, in.cfg.OpPtr}} {
		if *p.dst != "" || p.tokens == nil {
			continue
		}
		if m.Payload == nil {
			return checked{}, "no identity in the headers, and no body to read " + p.ptr + " from"
		}
		v, err := in.pr.valueAt(m.Payload, p.tokens)
		if err != nil || v.kind != '"' {
			return checked{}, fmt.Sprintf("no identity in the headers, and the body has no string at %s", p.ptr)
		}
		*p.dst = v.text
	}
	if err := (idem.Identity{TenantID: m.Tenant, OperationID: m.OperationID}).Validate(); err != nil {
		return checked{}, err.Error()
	}
	c := checked{m: m}
	if m.Payload != nil {
		canonical, hash, err := idem.Canonicalize(m.Payload, in.cfg.Limits)
		if err != nil {
			return checked{}, fmt.Sprintf("%s/%s: %v", m.Tenant, m.OperationID, err)
		}
		c.canonical, c.hash = canonical, hash
	}
	return c, ""
}

// decide says what one message is, and writes its batch line.
func (in *intake) decide(c checked, s *stored) error {
	line := BatchLine{Tenant: c.m.Tenant, OperationID: c.m.OperationID, Class: in.cfg.Class, Payload: c.canonical}
	trace, _ := json.Marshal(map[string]string{"source": in.sum.Source, "at": c.m.At})
	line.Transport = trace
	from := fmt.Sprintf("intake from %s (%s): ", in.sum.Source, c.m.At)
	switch {
	case c.canonical == nil && s == nil:
		in.count(NoPayload)
		line.Note = from + "absent from the inbox; the source carries no payload: fill in the original payload before resolving"
	case c.canonical == nil:
		in.count(Unchecked)
		return nil
	case s == nil:
		in.count(Absent)
		line.Note = from + "absent from the inbox"
	case s.class != in.cfg.Class || s.hash != c.hash:
		in.count(Conflicting)
		line.Note = from + "recorded with another payload (" + shortHash(s.hash) + ")"
		if s.class != in.cfg.Class {
			line.Note = from + "recorded under class " + s.class
		}
	default:
		in.count(Present)
		return nil
	}
	return in.out.Write(line)
}

func (in *intake) count(o IntakeOutcome) { in.sum.Counts[o]++ }

func shortHash(h string) string {
	if len(h) > len(idem.HashPrefix)+16 {
		return h[:len(idem.HashPrefix)+16] + "…"
	}
	return h
}

// record writes the intake.run audit row.
func (in *intake) record(ctx context.Context, runErr error) (int64, error) {
	var failure any
	if runErr != nil {
		failure = strings.Join(strings.Fields(runErr.Error()), " ")
	}
	counts := map[string]int64{}
	for _, o := range IntakeOutcomes {
		counts[string(o)] = in.sum.Counts[o]
	}
	rec, err := audit.Append(ctx, in.pool, audit.Entry{
		Actor: in.cfg.Operator, Action: "intake.run", Target: "source:" + in.sum.Source,
		Details: map[string]any{"source": in.sum.Source, "kind": in.sum.Kind, "class": in.sum.Class,
			"messages": in.sum.Messages, "counts": counts, "lines": in.sum.Lines, "problems": in.sum.Problems,
			"error": failure, "started_at": in.sum.StartedAt, "finished_at": in.sum.FinishedAt},
	})
	if err != nil {
		return 0, err
	}
	return rec.ID, nil
}
