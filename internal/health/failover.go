package health

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/recovery"
)

// failoverCheck warns when a class kept for ever commits without a
// synchronous standby (an operation acknowledged here can be lost in a
// failover, and only a person can then say whether it happened), and says
// when the primary last switched timeline, or that it cannot tell.
func failoverCheck(ctx context.Context, pool *pgxpool.Pool) Check {
	c := Check{Name: "failover", Verdict: OK}
	var forever []string
	var standbys, commit string
	err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(name ORDER BY name) FILTER (WHERE retention = 'forever'), '{}'),
	        current_setting('synchronous_standby_names'), current_setting('synchronous_commit')
	    FROM idem.op_class`).Scan(&forever, &standbys, &commit)
	if err != nil {
		c.Verdict, c.Detail = Warn, "cannot read the classes and the commit settings: "+err.Error()
		return c
	}
	var parts []string
	f, err := recovery.ReadFailover(ctx, pool)
	switch {
	case err != nil:
		parts = append(parts, "cannot read the timeline: "+err.Error())
	case !f.Readable:
		c.Verdict = Warn
		parts = append(parts, fmt.Sprintf("timeline %d, the time of its switch is unreadable", f.Timeline))
		c.Action = "run idemctl migrate as a superuser (it lets the schema owner list pg_wal: pg_ls_waldir)"
	case f.SwitchedAt != nil:
		parts = append(parts, fmt.Sprintf("promoted at %s (timeline %d)", f.SwitchedAt.UTC().Format(time.RFC3339), f.Timeline))
	case f.Timeline > 1:
		parts = append(parts, fmt.Sprintf("timeline %d, its history file is gone", f.Timeline))
	default:
		parts = append(parts, "never promoted (timeline 1)")
	}
	if len(forever) > 0 && (strings.TrimSpace(standbys) == "" || commit == "off" || commit == "local") {
		c.Verdict = Warn
		parts = append(parts, fmt.Sprintf("classes kept for ever (%s) commit without a synchronous standby (synchronous_standby_names %q, synchronous_commit %s): an operation acknowledged here can be lost in a failover",
			strings.Join(forever, ", "), standbys, commit))
		c.Action = "set synchronous_standby_names to the failover targets (synchronous_commit on or remote_apply)"
	}
	c.Detail = strings.Join(parts, "; ")
	return c
}
