package resolveview

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/recovery"
	"github.com/idemctl/idemctl/redrive"
	"github.com/idemctl/idemctl/tui/view"
)

// ResolveInput is one ambiguous operation typed into the resolve view.
type ResolveInput struct {
	Tenant      string
	OperationID string
	Class       string
	Payload     []byte
	DryRun      bool
}

// Prepare validates the input and computes the canonical payload and its hash
// (RFC 8785, SHA-256) without any I/O: the hash the later steps compare.
func (in ResolveInput) Prepare() (idem.Prepared, error) {
	return idem.Prepare(idem.Command{
		Identity: idem.Identity{TenantID: in.Tenant, OperationID: in.OperationID},
		Class:    in.Class,
		Payload:  in.Payload,
	}, idem.PayloadLimits{})
}

// Stored is what the inbox holds for an identity (step 2).
type Stored struct {
	// Found is false when the identity is absent.
	Found bool
	// Hash and Class are the stored payload hash and class.
	Hash  string
	Class string
	// Redriven is true when the identity is absent and its class runs its
	// effect in a service that a real run re-drives it through.
	Redriven bool
}

// Stepper runs the recovery protocol one step at a time, so the resolve view
// can show each step's finding before the next one starts. Step 3 (the hash
// comparison) is pure and lives in Compare.
type Stepper interface {
	// CheckPrimary is step 1: the database clock, or an error wrapping
	// recovery.ErrNotPrimary on a standby or a read-only session.
	CheckPrimary(ctx context.Context) (time.Time, error)
	// Lookup is step 2, read-only: what the inbox holds for p's identity.
	// When dryRun is set the lookup is the whole run, recorded as such.
	Lookup(ctx context.Context, p idem.Prepared, operator string, dryRun bool) (Stored, error)
	// Execute is steps 4 and 5: the atomic executor settles the identity
	// (runs it, returns the saved response, or quarantines a conflict) in a
	// transaction that checks the primary again.
	Execute(ctx context.Context, p idem.Prepared, operator string) (recovery.Result, error)
}

// Comparison is step 3.
type Comparison struct {
	// Outcome is what the comparison concludes: would_apply (absent),
	// already_applied (same hash and class) or would_conflict.
	Outcome recovery.Outcome
	// HashEqual and ClassEqual say what matched (false when absent).
	HashEqual  bool
	ClassEqual bool
}

// Compare is step 3: the canonical hashes (and classes) of the stored and the
// incoming payload. Raw JSON text is never compared.
func Compare(p idem.Prepared, s Stored) Comparison {
	if !s.Found && s.Redriven {
		return Comparison{Outcome: recovery.WouldRedrive}
	}
	if !s.Found {
		return Comparison{Outcome: recovery.WouldApply}
	}
	c := Comparison{HashEqual: s.Hash == p.Hash, ClassEqual: s.Class == p.Class}
	if c.HashEqual && c.ClassEqual {
		c.Outcome = recovery.AlreadyApplied
	} else {
		c.Outcome = recovery.WouldConflict
	}
	return c
}

// ProtocolStepper is the Stepper over package recover (package recovery): it
// writes no SQL of its own. Step 2 is a one-operation dry run of the
// Resolver (read-only, batched lookup), step 4 a one-operation real run.
type ProtocolStepper struct {
	Pool *pgxpool.Pool
}

// Source names TUI runs in the audit log (resolve.start and resolve.run,
// target resolve:tui).
const Source = "tui"

// CheckPrimary runs recovery.CheckPrimary.
func (s *ProtocolStepper) CheckPrimary(ctx context.Context) (time.Time, error) {
	return recovery.CheckPrimary(ctx, s.Pool)
}

// Lookup asks the Resolver in dry-run mode, which looks the identity up
// without writing and reports what a run would do.
func (s *ProtocolStepper) Lookup(ctx context.Context, p idem.Prepared, operator string, dryRun bool) (Stored, error) {
	res, err := s.runOne(ctx, p, operator, true, dryRun)
	if err != nil {
		return Stored{}, err
	}
	switch res.Outcome {
	case recovery.WouldApply:
		return Stored{}, nil
	case recovery.WouldRedrive:
		return Stored{Redriven: true}, nil
	case recovery.AlreadyApplied:
		return Stored{Found: true, Hash: p.Hash, Class: p.Class}, nil
	case recovery.WouldConflict:
		st := Stored{Found: true, Hash: res.StoredHash, Class: p.Class}
		if res.StoredClass != "" {
			st.Class = res.StoredClass
		}
		return st, nil
	}
	return Stored{}, outcomeErr(res)
}

// Execute runs the Resolver for real on this one operation.
func (s *ProtocolStepper) Execute(ctx context.Context, p idem.Prepared, operator string) (recovery.Result, error) {
	res, err := view.Cleaned(s.runOne(ctx, p, operator, false, true))
	if err != nil {
		return res, err
	}
	if res.Outcome == recovery.Failed || res.Outcome == recovery.Invalid {
		return res, outcomeErr(res)
	}
	return res, nil
}

// runOne runs the Resolver over a single request. A run whose audit record
// failed still returns its result, with the error (recovery.ErrNotRecorded).
func (s *ProtocolStepper) runOne(ctx context.Context, p idem.Prepared, operator string, dryRun, record bool) (recovery.Result, error) {
	r := &recovery.Resolver{Pool: s.Pool, Config: recovery.Config{
		Concurrency: 1, DryRun: dryRun, Operator: operator, Source: Source,
		Credentials: redrive.CredentialsFromEnv(),
	}}
	if record {
		// As every run: resolve.start before it reads, resolve.run at its end.
		if err := recovery.AuditRunStart(ctx, s.Pool, recovery.RunSummary{Operator: operator, Source: Source, DryRun: dryRun}); err != nil {
			return recovery.Result{}, fmt.Errorf("record the run's start in the audit log: %w", err)
		}
		r.RecordRun = func(ctx context.Context, sum recovery.RunSummary) error { return recovery.AuditRun(ctx, s.Pool, sum) }
	}
	var res recovery.Result
	var got bool
	_, err := r.Run(ctx, recovery.Single(recovery.Request{
		Tenant: p.TenantID, OperationID: p.OperationID, Class: p.Class, Payload: p.Payload,
	}), func(r recovery.Result) error {
		res, got = r, true
		return nil
	})
	if err != nil && !(got && errors.Is(err, recovery.ErrNotRecorded)) {
		return res, err
	}
	if !got {
		return res, errors.New("the resolver gave no answer (interrupted)")
	}
	return res, err
}

func outcomeErr(res recovery.Result) error {
	if res.Err != nil {
		return fmt.Errorf("%s: %w", res.Outcome, res.Err)
	}
	return fmt.Errorf("unexpected outcome %s", res.Outcome)
}
