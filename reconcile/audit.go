package reconcile

import (
	"context"
	"strings"

	"github.com/idemctl/idemctl/audit"
)

// AuditRun records a reconcile run in the audit log (action reconcile.run,
// target report:sha256:<hex>): the report (name, SHA-256, size, lines), the
// class and window, the counts and amounts, what was emitted and pinned, and
// why anything was withheld. It returns the audit row's id.
func AuditRun(ctx context.Context, db audit.DBTX, operator string, s Summary, runErr error) (int64, error) {
	var failure any // JSON null unless the run failed
	if runErr != nil {
		failure = strings.Join(strings.Fields(runErr.Error()), " ")
	}
	counts := map[string]int64{}
	for _, st := range Statuses {
		counts[string(st)] = s.Counts[st]
	}
	rec, err := audit.Append(ctx, db, audit.Entry{
		Actor:  operator,
		Action: "reconcile.run",
		Target: "report:sha256:" + s.Report.SHA256,
		Details: map[string]any{
			"report": s.Report, "class": s.Class, "since": s.Since, "until": s.Until,
			"counts": counts, "amounts": s.Amounts,
			"emit_file": s.EmitFile, "emitted": s.Emitted, "record_file": s.RecordFile, "record_lines": s.RecordLines,
			"pinned": s.Pinned, "already_pinned": s.AlreadyPinned,
			"withheld": s.Withheld, "interrupted": s.Interrupted, "error": failure,
			"started_at": s.StartedAt, "finished_at": s.FinishedAt,
		},
	})
	if err != nil {
		return 0, err
	}
	return rec.ID, nil
}
