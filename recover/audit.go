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
	_, err := audit.Append(ctx, db, audit.Entry{
		Actor:  s.Operator,
		Action: "resolve.run",
		Target: runTarget(s),
		Details: map[string]any{
			"source": s.Source, "input_sha256": nullIfEmpty(s.InputSHA256), "dry_run": s.DryRun,
			"started_at": s.StartedAt, "finished_at": s.FinishedAt,
			"read": s.Read, "answered": s.Counts.Total(), "counts": counts, "interrupted": s.Interrupted,
			"last_line": s.LastLine, "unknown": s.Unknown, "redriven": s.Redriven, "write_error": writeErr,
		},
	})
	return err
}

// AuditRunStart records that a run starts (action resolve.start), before
// it reads its first operation: a run that an outage or a kill stops before
// its end (and its resolve.run record) still leaves a trace of what it was
// about to do, with its input's name and SHA-256 when known. The row's own
// time (the database clock) is the start.
func AuditRunStart(ctx context.Context, db audit.DBTX, s RunSummary) error {
	_, err := audit.Append(ctx, db, audit.Entry{
		Actor:  s.Operator,
		Action: "resolve.start",
		Target: runTarget(s),
		Details: map[string]any{
			"source": s.Source, "input_sha256": nullIfEmpty(s.InputSHA256), "dry_run": s.DryRun,
		},
	})
	return err
}

func runTarget(s RunSummary) string {
	target := "resolve:" + s.Source
	if len(target) > audit.MaxTargetBytes {
		target = target[:audit.MaxTargetBytes]
	}
	return target
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
