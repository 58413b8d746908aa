package lab

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/migrations"
)

//go:embed *.sql *.redis
var sqlFiles embed.FS

// SchemaPrefix starts the name of every scratch schema the lab creates:
// idemlab_<run>_<design>. Nothing else is ever written by the lab.
const SchemaPrefix = "idemlab_"

// staleAfter is how old a scratch schema of another host must be before a new
// run drops it: the lab cannot tell whether a remote pid is still alive.
const staleAfter = 24 * time.Hour

// ledgerSQL is the demo ledger, installed into each scratch schema.
var ledgerSQL = demo.SQL()

// qualifierRE finds the schema qualifiers the lab rewrites: the project's own
// (idem., demo.) and the placeholder of the lab's files (scratch.), when they
// start a name rather than end one (pseudo.x, a.demo.b and "x".idem. are left alone).
var qualifierRE = regexp.MustCompile(`(^|[^A-Za-z0-9_$."])(idem|demo|scratch)\.`)

// schemaStmtRE finds the schema named on its own in DDL (CREATE SCHEMA idem).
var schemaStmtRE = regexp.MustCompile(`(?i)\b(SCHEMA(?:\s+IF\s+NOT\s+EXISTS)?\s+)(idem|demo)\b`)

// pinnedPathRE finds the search_path every function of the code package and
// the ledger's effect pin: pg_catalog, then its schema, then pg_temp.
var pinnedPathRE = regexp.MustCompile(`(?i)(\bsearch_path\s*=\s*pg_catalog,\s*)(idem|demo)(,\s*pg_temp\b)`)

var (
	sqlCommentRE = regexp.MustCompile(`--[^\n]*`)
	bareIdemRE   = regexp.MustCompile(`(?i)(\bidem\b|"idem"|\bdemo\.)`)
)

// qualify rewrites SQL written for schema idem (or demo, or the lab's scratch
// placeholder) to run in schema instead. It refuses SQL that still names idem
// in a form it cannot rewrite, so that installing into a scratch schema can
// never write into the real one.
func qualify(sql, schema string) (string, error) {
	if !strings.HasPrefix(schema, SchemaPrefix) {
		return "", fmt.Errorf("refuse to install into %q: not a lab schema", schema)
	}
	out := qualifierRE.ReplaceAllString(sql, "${1}"+schema+".")
	out = schemaStmtRE.ReplaceAllString(out, "${1}"+schema)
	out = pinnedPathRE.ReplaceAllString(out, "${1}"+schema+"${3}")
	out = strings.ReplaceAll(out, "'idem'", "'"+schema+"'")
	if m := bareIdemRE.FindString(sqlCommentRE.ReplaceAllString(out, "")); m != "" {
		return "", fmt.Errorf("SQL names %s in a form the lab cannot move to a scratch schema", m)
	}
	return out, nil
}

// statements are the named queries of one .sql file ("-- name: x" sections).
type statements map[string]string

var nameHeaderRE = regexp.MustCompile(`^--\s*name:\s*([a-z_]+)\s*$`)

func parseStatements(src string) (statements, error) {
	out := statements{}
	var name string
	var body []string
	flush := func() error {
		if name == "" {
			return nil
		}
		s := strings.TrimSpace(strings.Join(body, "\n"))
		if s == "" {
			return fmt.Errorf("statement %q is empty", name)
		}
		if _, dup := out[name]; dup {
			return fmt.Errorf("statement %q is defined twice", name)
		}
		out[name] = s
		return nil
	}
	for _, line := range strings.Split(src, "\n") {
		if m := nameHeaderRE.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			if err := flush(); err != nil {
				return nil, err
			}
			name, body = m[1], nil
			continue
		}
		if name != "" {
			body = append(body, line)
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// loadStatements reads one embedded file and qualifies it for schema.
func loadStatements(file, schema string) (statements, error) {
	src, err := sqlFiles.ReadFile(file)
	if err != nil {
		return nil, err
	}
	q, err := qualify(string(src), schema)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	st, err := parseStatements(q)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return st, nil
}

// schemaName is the scratch schema of one design in one run.
func schemaName(runID, design string) string {
	return SchemaPrefix + runID + "_" + design
}

// owner is what a scratch schema's comment records, so that a later run can
// tell a live run's schemas from the leftovers of one that was killed.
type owner struct {
	Run     string    `json:"run"`
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
}

const ownerCommentPrefix = "idemctl lab "

func currentOwner(runID string, started time.Time) owner {
	host, _ := os.Hostname()
	return owner{Run: runID, PID: os.Getpid(), Host: host, Started: started.UTC()}
}

// createSchema creates an empty scratch schema that names its owner.
func createSchema(ctx context.Context, conn *pgx.Conn, schema string, o owner) error {
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	ident := pgx.Identifier{schema}.Sanitize()
	comment := ownerCommentPrefix + string(b)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		return fmt.Errorf("create scratch schema %s: %w", schema, err)
	}
	// COMMENT takes no parameters: the literal is quoted by the server's rules.
	if _, err := conn.Exec(ctx, "COMMENT ON SCHEMA "+ident+" IS "+quoteLiteral(comment)); err != nil {
		return fmt.Errorf("comment scratch schema %s: %w", schema, err)
	}
	return nil
}

func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// installDesign installs what design d runs on into schema, in one
// transaction whose search_path is the scratch schema alone: the demo ledger,
// and for a design that calls the Core executor (d.core) every embedded
// migration and the code package first, their idem. and demo. qualifiers
// rewritten. The other designs bring their own tables and never touch the
// Core: installing it for them cost 0.5 s of server CPU a design for nothing.
// Nothing is granted to anyone: the lab's own login owns it all.
func installDesign(ctx context.Context, conn *pgx.Conn, d design, schema string) error {
	parts, err := designSQL(d, schema)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL search_path = "+pgx.Identifier{schema}.Sanitize()+", pg_catalog"); err != nil {
			return err
		}
		for _, p := range parts {
			if _, err := tx.Exec(ctx, p.sql); err != nil {
				return fmt.Errorf("install %s into %s: %w", p.name, schema, err)
			}
		}
		return nil
	})
}

// designSQL is what installDesign runs for d, qualified for schema.
func designSQL(d design, schema string) ([]namedSQL, error) {
	if !strings.HasPrefix(schema, SchemaPrefix) {
		return nil, fmt.Errorf("refuse to install into %q: not a lab schema", schema)
	}
	if !d.core {
		sql, err := qualify(ledgerSQL, schema)
		if err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
		return []namedSQL{{"ledger", sql}}, nil
	}
	coreOnce.Do(func() { coreParts, coreErr = qualifiedCore() })
	if coreErr != nil {
		return nil, coreErr
	}
	out := make([]namedSQL, len(coreParts))
	for i, p := range coreParts {
		out[i] = namedSQL{p.name, strings.ReplaceAll(p.sql, corePlaceholder, schema)}
	}
	return out, nil
}

// The Core's SQL qualified once per process for corePlaceholder, which each
// install then replaces with its schema: qualifying it anew cost about as much
// CPU as the server spent installing it (1 s a design under the race
// detector). TestCoreQualifiedOnceIsQualify checks the two agree.
var (
	coreOnce  sync.Once
	coreParts []namedSQL
	coreErr   error
)

// corePlaceholder stands for the scratch schema in coreParts: a lab schema
// name that no run makes (a run id is 8 hex digits) and no SQL file holds.
const corePlaceholder = SchemaPrefix + "schema_placeholder_"

func qualifiedCore() ([]namedSQL, error) {
	parts, err := executorSQL()
	if err != nil {
		return nil, err
	}
	for i, p := range parts {
		if strings.Contains(p.sql, corePlaceholder) {
			return nil, fmt.Errorf("%s holds the lab's placeholder %s", p.name, corePlaceholder)
		}
		if parts[i].sql, err = qualify(p.sql, corePlaceholder); err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
	}
	return parts, nil
}

type namedSQL struct{ name, sql string }

// executorSQL is what installDesign runs for a design on the Core, in order:
// the migrations, the code package, the ledger, and the day partitions
// around today.
func executorSQL() ([]namedSQL, error) {
	all, err := migrations.All()
	if err != nil {
		return nil, err
	}
	code, err := migrations.Code()
	if err != nil {
		return nil, err
	}
	var out []namedSQL
	for _, m := range all {
		out = append(out, namedSQL{fmt.Sprintf("migration %03d_%s", m.Version, m.Name), m.SQL})
	}
	for _, o := range code {
		out = append(out, namedSQL{"code " + o.File, o.SQL})
	}
	return append(out,
		// The lab's login owns the scratch schema and its effect alike (a
		// demonstration, not a trust boundary): the per-call check that an
		// effect's owner is powerless would refuse every call, so the
		// scratch copy of the check passes every effect.
		namedSQL{"effect check", `CREATE OR REPLACE FUNCTION idem.effect_problem(p_effect oid, p_nsp oid DEFAULT NULL, p_name name DEFAULT NULL)
RETURNS text LANGUAGE sql AS 'SELECT NULL::text'`},
		namedSQL{"ledger", ledgerSQL},
		namedSQL{"partitions", "SELECT idem.inbox_body_ensure(current_date - 1, current_date + 8)"}), nil
}

// dropSchemas drops the given scratch schemas. It runs on a fresh context: it is
// called when the run's context is already cancelled.
func dropSchemas(conn *pgx.Conn, schemas []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var errs []error
	for _, s := range schemas {
		if !strings.HasPrefix(s, SchemaPrefix) {
			continue
		}
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			// A killed worker's backend may still hold a lock for a moment.
			_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE")
			if err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(time.Duration(200*(attempt+1)) * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("drop scratch schema %s: %w", s, err))
		}
	}
	return errors.Join(errs...)
}

// dropStale drops the scratch schemas of runs that are gone: on this host, a
// pid that no longer exists; elsewhere, a run older than staleAfter. Schemas
// without a readable owner are left alone. It returns what it dropped.
func dropStale(ctx context.Context, conn *pgx.Conn, now time.Time) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT nspname, coalesce(obj_description(oid, 'pg_namespace'), '')
		FROM pg_namespace WHERE nspname LIKE 'idemlab\_%' ORDER BY nspname`)
	if err != nil {
		return nil, fmt.Errorf("list scratch schemas: %w", err)
	}
	type cand struct{ name, comment string }
	var cands []cand
	for rows.Next() {
		var c cand
		if err := rows.Scan(&c.name, &c.comment); err != nil {
			return nil, err
		}
		cands = append(cands, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	var stale []string
	for _, c := range cands {
		if !strings.HasPrefix(c.comment, ownerCommentPrefix) {
			continue
		}
		var o owner
		if json.Unmarshal([]byte(strings.TrimPrefix(c.comment, ownerCommentPrefix)), &o) != nil {
			continue
		}
		if (o.Host == host && !processAlive(o.PID)) || now.Sub(o.Started) > staleAfter {
			stale = append(stale, c.name)
		}
	}
	if len(stale) == 0 {
		return nil, nil
	}
	return stale, dropSchemas(conn, stale)
}
