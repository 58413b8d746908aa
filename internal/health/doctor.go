package health

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/migrations"
)

var (
	//go:embed sql/replication.sql
	replicationSQL string
	//go:embed sql/memberships.sql
	membershipsSQL string
	//go:embed sql/partitions_ahead.sql
	partitionsAheadSQL string
	//go:embed sql/audit_head.sql
	auditHeadSQL string
	//go:embed sql/quarantine_open.sql
	quarantineOpenSQL string
)

// Verdict is one check's result.
type Verdict string

// Verdicts: ok, warn (works, but look at it), fail (idemctl cannot be
// trusted here until it is fixed).
const (
	OK   Verdict = "ok"
	Warn Verdict = "warn"
	Fail Verdict = "fail"
)

// Check is one line of idemctl doctor: what was checked, the verdict, what
// was found and what to do.
type Check struct {
	Name    string  `json:"check"`
	Verdict Verdict `json:"verdict"`
	Detail  string  `json:"detail"`
	Action  string  `json:"action,omitempty"`
}

// MinPartitionsAhead is how many days of inbox partitions doctor wants ahead.
const MinPartitionsAhead = 2 * 24 * time.Hour

// DoctorOptions tune Doctor.
type DoctorOptions struct {
	// ProbeSources probes every replay source (each under its timeout).
	ProbeSources bool
}

// Doctor runs the checks that need a connection, in order, after the
// caller has reached the server: primary, replication, schema, grants,
// partitions, replay sources, audit chain head, quarantine, failover. A check that
// cannot run says so (warn) and the others go on; the schema's absence
// ends the list (nothing else can be read).
func Doctor(ctx context.Context, pool *pgxpool.Pool, o DoctorOptions) ([]Check, error) {
	s, err := Probe(ctx, pool)
	if err != nil {
		return nil, err
	}
	out := []Check{primaryCheck(s), replicationCheck(ctx, pool, s)}
	schema := Check{Name: "schema", Verdict: OK, Detail: fmt.Sprintf("schema %03d, code package %d, as this binary expects",
		migrations.SchemaVersion(), migrations.CodeVersion)}
	if p := s.SchemaProblem(); p != "" {
		schema.Verdict, schema.Detail, schema.Action = Fail, p, actionOf(p)
		return append(out, schema), nil
	}
	if s.Schema == SchemaUnreadable {
		schema.Verdict, schema.Detail = Warn, "this login may not read the schema's history (a service login?)"
		schema.Action = "run idemctl doctor as an operator or auditor login"
	}
	out = append(out, schema, grantsCheck(ctx, pool, s))
	out = append(out, partitionsCheck(ctx, pool))
	if o.ProbeSources {
		out = append(out, sourcesCheck(ctx, pool))
	}
	out = append(out, auditCheck(ctx, pool), quarantineCheck(ctx, pool), failoverCheck(ctx, pool))
	return out, nil
}

// actionOf is the "run ..." part of a schema problem.
func actionOf(problem string) string {
	if i := strings.LastIndex(problem, "("); i > 0 && strings.HasSuffix(problem, ")") {
		return problem[i+1 : len(problem)-1]
	}
	if i := strings.LastIndex(problem, ": "); i > 0 {
		return problem[i+2:]
	}
	return ""
}

func primaryCheck(s Session) Check {
	c := Check{Name: "primary", Verdict: OK, Detail: "the primary, in a read-write session"}
	switch {
	case s.InRecovery:
		c.Verdict, c.Detail = Fail, "a standby (in recovery): it can lag, so \"not found\" there proves nothing; every command that writes refuses it"
		c.Action = "use a DSN naming the primary, or several hosts with target_session_attrs=read-write"
	case s.ReadOnly:
		c.Verdict, c.Detail = Fail, "a read-only session (default_transaction_read_only is on): every command that writes refuses it"
		c.Action = "use a read-write login or DSN (target_session_attrs=read-write)"
	}
	return c
}

func replicationCheck(ctx context.Context, pool *pgxpool.Pool, s Session) Check {
	c := Check{Name: "replication"}
	if s.InRecovery {
		c.Verdict, c.Detail = Warn, "this server is itself a standby"
		return c
	}
	rows, err := pool.Query(ctx, replicationSQL)
	if err != nil {
		c.Verdict, c.Detail = Warn, "cannot read pg_stat_replication: "+err.Error()
		return c
	}
	defer rows.Close()
	var async, sync, hidden int
	var names []string
	for rows.Next() {
		var name, standbys, commit string
		var state *string
		if err := rows.Scan(&name, &state, &standbys, &commit); err != nil {
			c.Verdict, c.Detail = Warn, "cannot read pg_stat_replication: "+err.Error()
			return c
		}
		names = append(names, name)
		switch {
		case state == nil:
			hidden++
		case *state == "sync" || *state == "quorum":
			sync++
		default:
			async++
		}
	}
	if err := rows.Err(); err != nil {
		c.Verdict, c.Detail = Warn, "cannot read pg_stat_replication: "+err.Error()
		return c
	}
	switch {
	case len(names) == 0:
		c.Verdict, c.Detail = OK, "no standby streams from this server"
	case hidden > 0:
		c.Verdict, c.Detail = Warn, fmt.Sprintf("%d standby(s), their sync state hidden from this login", len(names))
		c.Action = "run doctor as a login with pg_monitor to see whether they are synchronous"
	case async > 0:
		c.Verdict = Warn
		c.Detail = fmt.Sprintf("%d of %d standby(s) asynchronous: after the promotion of one, an operation that happened here can be absent there, and \"absent\" proves nothing",
			async, len(names))
		c.Action = "use synchronous replication (synchronous_standby_names) for failover targets, or check every answer given after a failover"
	default:
		c.Verdict, c.Detail = OK, fmt.Sprintf("%d synchronous standby(s)", sync)
	}
	return c
}

func grantsCheck(ctx context.Context, pool *pgxpool.Pool, s Session) Check {
	c := Check{Name: "grants"}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		c.Verdict, c.Detail = Warn, "cannot check: "+err.Error()
		return c
	}
	defer conn.Release()
	roles, err := migrations.InstalledRoles(ctx, conn)
	if err != nil {
		roles = migrations.DefaultRoles()
	}
	rows, err := conn.Query(ctx, membershipsSQL, []string{roles.Owner, roles.App, roles.Operator, roles.Auditor})
	if err != nil {
		c.Verdict, c.Detail = Warn, "cannot read role memberships: "+err.Error()
		return c
	}
	kinds := map[string]string{roles.Owner: "owner", roles.App: "service (app)", roles.Operator: "operator", roles.Auditor: "auditor"}
	var acts []string
	for rows.Next() {
		var role string
		var member bool
		if err := rows.Scan(&role, &member); err != nil {
			rows.Close()
			c.Verdict, c.Detail = Warn, "cannot read role memberships: "+err.Error()
			return c
		}
		if member {
			acts = append(acts, kinds[role])
		}
	}
	rows.Close()
	who := "login " + s.User
	if s.Superuser {
		who += " (superuser)"
	}
	if len(acts) == 0 {
		c.Verdict, c.Detail = Fail, who+" is none of the schema's kinds of user"
		c.Action = fmt.Sprintf("GRANT %s TO %s (a person), %s (an auditor) or %s (a service)", roles.Operator, s.User, roles.Auditor, roles.App)
		return c
	}
	c.Verdict, c.Detail = OK, who+" acts as "+strings.Join(acts, ", ")
	problems, err := migrations.Check(ctx, conn.Conn(), roles)
	switch {
	case err != nil:
		c.Verdict, c.Detail = Warn, c.Detail+"; the schema's privileges could not be compared: "+err.Error()
	case len(problems) > 0:
		c.Verdict = Fail
		c.Detail += fmt.Sprintf("; %d privilege(s) differ from the code package, first: %s", len(problems), problems[0])
		c.Action = "run idemctl migrate as a superuser to repair them"
	default:
		c.Detail += "; the schema's privileges are as installed"
	}
	return c
}

func partitionsCheck(ctx context.Context, pool *pgxpool.Pool) Check {
	c := Check{Name: "partitions"}
	var upper *time.Time
	var now time.Time
	var inDefault float64
	if err := pool.QueryRow(ctx, partitionsAheadSQL).Scan(&upper, &now, &inDefault); err != nil {
		c.Verdict, c.Detail = Warn, "cannot read the inbox's partitions: "+err.Error()
		return c
	}
	if upper == nil || upper.Sub(now) < MinPartitionsAhead {
		ahead := "none"
		if upper != nil {
			ahead = "until " + upper.UTC().Format("2006-01-02")
		}
		c.Verdict, c.Detail = Warn, "daily inbox partitions ahead: "+ahead+"; new rows land in the default partition, which purges reach only by batches"
		c.Action = "run idemctl horizon maintain (daily, from cron)"
		return c
	}
	c.Verdict, c.Detail = OK, fmt.Sprintf("daily inbox partitions until %s (%.0f days ahead)", upper.UTC().Format("2006-01-02"),
		upper.Sub(now).Hours()/24)
	return c
}

func sourcesCheck(ctx context.Context, pool *pgxpool.Pool) Check {
	c := Check{Name: "sources"}
	evidence, err := horizon.ProbeSources(ctx, pool)
	if err != nil {
		c.Verdict, c.Detail = Warn, "cannot probe the replay sources: "+err.Error()
		return c
	}
	var failed []string
	external := 0
	for _, ev := range evidence {
		if ev.Kind != horizon.KindManual {
			external++
		}
		if ev.Verdict == horizon.VerdictFailed {
			failed = append(failed, ev.Source+": "+ev.Reason)
		}
	}
	switch {
	case len(failed) > 0:
		c.Verdict = Warn
		c.Detail = fmt.Sprintf("%d of %d replay source(s) cannot be probed (no purge can be planned): %s", len(failed), len(evidence), strings.Join(failed, "; "))
		c.Action = "fix the source or its credentials (idemctl horizon source list)"
	case external == 0:
		c.Verdict, c.Detail = Warn, "no replay source but the manual one: no purge can be proven"
		c.Action = "add the topics, dead-letter queues and archives that can replay (idemctl horizon source add)"
	default:
		c.Verdict, c.Detail = OK, fmt.Sprintf("%d replay source(s) probed", len(evidence))
	}
	return c
}

func auditCheck(ctx context.Context, pool *pgxpool.Pool) Check {
	c := Check{Name: "audit"}
	var head, last int64
	var at time.Time
	if err := pool.QueryRow(ctx, auditHeadSQL).Scan(&head, &last, &at); err != nil {
		c.Verdict, c.Detail = Warn, "cannot read the audit chain's head: "+err.Error()
		return c
	}
	if head != last {
		c.Verdict = Fail
		c.Detail = fmt.Sprintf("the chain's head says row %d, the log ends at row %d: rows were added or removed behind the log's back", head, last)
		c.Action = "run idemctl audit verify"
		return c
	}
	c.Verdict, c.Detail = OK, fmt.Sprintf("chain head at row %d (idemctl audit verify recomputes it whole)", head)
	return c
}

func quarantineCheck(ctx context.Context, pool *pgxpool.Pool) Check {
	c := Check{Name: "quarantine"}
	var n int64
	var oldest *time.Time
	var now time.Time
	if err := pool.QueryRow(ctx, quarantineOpenSQL).Scan(&n, &oldest, &now); err != nil {
		c.Verdict, c.Detail = Warn, "cannot read the quarantine: "+err.Error()
		return c
	}
	if n == 0 {
		c.Verdict, c.Detail = OK, "no open quarantine record"
		return c
	}
	c.Verdict = Warn
	c.Detail = fmt.Sprintf("%d open quarantine record(s), the oldest first seen %s ago", n, now.Sub(*oldest).Round(time.Second))
	c.Action = "review them: idemctl quarantine list (or idemctl tui)"
	return c
}
