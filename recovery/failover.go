package recovery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemctl/idemctl/redrive"
)

// RecentFailover is how far back a timeline switch is noted on lines that
// do not say when their first attempt was (no first_attempt_at): such a
// line may predate it, and an older switch is not worth a note on every
// absent identity.
const RecentFailover = 7 * 24 * time.Hour

// Failover is what the primary says of its last promotion
// (idem.timeline_switch): the WAL timeline it writes on and when it switched
// to it. A commit an old primary acknowledged and had not streamed to the
// standby promoted in its place is lost at that moment.
type Failover struct {
	Timeline int `json:"timeline"`
	// SwitchedAt is nil on timeline 1 (never promoted), and when the time
	// cannot be read (Readable false, or the history file is gone).
	SwitchedAt *time.Time `json:"switched_at,omitempty"`
	// Readable is false when the schema owner may not list pg_wal.
	Readable bool `json:"readable"`
}

// ReadFailover reads the primary's timeline and the time it switched to it.
func ReadFailover(ctx context.Context, db RowQuerier) (Failover, error) {
	var f Failover
	if err := db.QueryRow(ctx, "SELECT timeline, switched_at, readable FROM idem.timeline_switch()").
		Scan(&f.Timeline, &f.SwitchedAt, &f.Readable); err != nil {
		return f, fmt.Errorf("read the primary's timeline: %w", err)
	}
	return f, nil
}

// note adds to a line whose identity the primary does not hold that it may
// have been acknowledged by the old primary and lost in the failover: when
// its first attempt (first_attempt_at) came before the switch, or, without
// one, when the switch is recent (RecentFailover before now). It changes no
// outcome: a SQL effect was lost with its inbox row, so applying it now is
// its only run; an application-code class is re-driven only when it is
// downstream-idempotent, as always.
func (f Failover) note(res *Result, now time.Time, sqlEffect bool) {
	if f.SwitchedAt == nil || !absentOnPrimary(res) {
		return
	}
	at := *f.SwitchedAt
	var why string
	switch {
	case !res.firstAttempt.IsZero() && res.firstAttempt.Before(at):
		why = "its first attempt (" + res.firstAttempt.UTC().Format(time.RFC3339) + ") came before it"
	case res.firstAttempt.IsZero() && now.Sub(at) < RecentFailover:
		why = "the line gives no first_attempt_at"
	default:
		return
	}
	msg := fmt.Sprintf("may have been acknowledged and lost in the failover at %s (timeline %d; %s)",
		at.UTC().Format(time.RFC3339), f.Timeline, why)
	if sqlEffect {
		msg += ": its SQL effect was lost with it"
	} else {
		msg += ": the service's downstream call may have happened; check with the provider"
	}
	if res.Note != "" {
		msg = res.Note + "; " + msg
	}
	res.Note = msg
}

// absentOnPrimary reports whether a result says the primary did not hold
// its identity: applied now, would be applied or re-driven, re-driven, or
// refused for being application code.
func absentOnPrimary(res *Result) bool {
	switch res.Outcome {
	case Applied, WouldApply, WouldRedrive, Pending:
		return true
	case Failed:
		return res.Redrive != nil || errors.Is(res.Err, errAppEffect) || errors.Is(res.Err, redrive.ErrNotIdempotent)
	}
	return false
}

// failover reads the primary's last timeline switch for a run; a run goes on
// without the notes when it cannot be read (Summary.Failover nil, or not
// Readable).
func (r *Resolver) failover(ctx context.Context, sum *RunSummary) Failover {
	f, err := ReadFailover(ctx, r.Pool)
	if err != nil {
		return Failover{}
	}
	sum.Failover = &f
	return f
}
