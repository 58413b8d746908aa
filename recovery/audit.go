package recovery

import (
	"context"
	"strings"

	"github.com/idemctl/idemctl/audit"
)

// AuditRun records a run in the audit log (action resolve.run, target
// resolve:<source>), with its counts, in its own transaction. The CLI and the
// TUI both record their runs through it.
func AuditRun(ctx context.Context, db audit.DBTX, s RunSummary) error {
	counts := map[string]int{}
	for o, n := range s.Counts {
		counts[string(o)] = n
	}
	var writeErr any // JSON null unless results could not be written
	if s.WriteErr != nil {
		writeErr = strings.Join(strings.Fields(s.WriteErr.Error()), " ")
	}
	return appendRun(ctx, db, "resolve.run", s, map[string]any{
		"started_at": s.StartedAt, "finished_at": s.FinishedAt,
		"read": s.Read, "answered": s.Counts.Total(), "counts": counts, "interrupted": s.Interrupted,
		"last_line": s.LastLine, "write_error": writeErr,
		// unknown: every operation whose outcome is unknown, of which
		// redrive_unknown were sent to their service with no usable answer
		// (the others lost their database connection in flight); not_sent
		// never reached their service (nothing ran).
		"unknown": s.Unknown + s.RedriveUnknown, "redriven": s.Redriven, "redrive_unknown": s.RedriveUnknown, "not_sent": s.NotSent,
	})
}

// AuditRunStart records that a run starts (action resolve.start), before
// it reads its first operation: a run that an outage or a kill stops before
// its end (and its resolve.run record) still leaves a trace of what it was
// about to do, with its input's name and SHA-256 when known. The row's own
// time (the database clock) is the start.
func AuditRunStart(ctx context.Context, db audit.DBTX, s RunSummary) error {
	return appendRun(ctx, db, "resolve.start", s, nil)
}

// appendRun appends one record of run s (target resolve:<source>): what
// names the input, and details.
func appendRun(ctx context.Context, db audit.DBTX, action string, s RunSummary, details map[string]any) error {
	target := "resolve:" + s.Source
	if len(target) > audit.MaxTargetBytes {
		target = target[:audit.MaxTargetBytes]
	}
	var digest any // JSON null when the input's digest is not known
	if s.InputSHA256 != "" {
		digest = s.InputSHA256
	}
	d := map[string]any{"source": s.Source, "input_sha256": digest, "dry_run": s.DryRun}
	for k, v := range details {
		d[k] = v
	}
	_, err := audit.Append(ctx, db, audit.Entry{Actor: s.Operator, Action: action, Target: target, Details: d})
	return err
}
