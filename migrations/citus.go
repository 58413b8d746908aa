package migrations

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// On a Citus coordinator (a database with the citus extension) Apply lays the
// schema out for Citus after the code package, in the same run, and checks it
// again on every run (each step is skipped when already done):
//
//   - the per-operation tables, keyed tenant first, are distributed by
//     tenant_id and co-located with idem.identity: identity, inbox_body (still
//     partitioned by day: each partition is distributed, and the partitions
//     idem.inbox_body_ensure creates later are too), pending_claim, quarantine;
//   - what the executor reads on the worker that holds a tenant's shard is a
//     reference table (a copy on every node): op_class, horizon_plan,
//     horizon_pin;
//   - what only operators write stays on the coordinator as Citus local
//     tables, so that an operator's transaction that also changes a
//     distributed table commits both with two-phase commit: the audit chain
//     and its head (one chain, in one place), persons and logins, replay
//     sources, corrections, purge batches, what the replay probes enumerate
//     and the re-drive allow-list;
//   - every function of the schema whose signature Citus can follow is
//     created on every node; idem.execute, idem.claim and idem.complete are
//     distributed functions on their tenant_id argument, co-located with
//     idem.identity, with force_delegation: a call runs on the node holding
//     the tenant's shard as a single-node transaction, and an effect that
//     reaches for a shard elsewhere is refused there, at run time.
//
// Citus opens its connections to the workers as the current role, and the
// owner's SECURITY DEFINER functions run as the owner: so on Citus the owner
// role must be able to log in (it still has no password; pg_hba.conf or
// pg_dist_authinfo decides how the nodes authenticate it).

// CitusTable is one table the layout changed.
type CitusTable struct {
	Table string `json:"table"`
	// Kind is distributed (by tenant_id, co-located with idem.identity),
	// reference or local (a Citus local table on the coordinator).
	Kind string `json:"kind"`
	// Rows is how many rows it held, copied to the shards.
	Rows int64 `json:"rows"`
	// Locked is how long the step held the table's lock: writes to it waited
	// that long (reads too, at the end of the copy).
	Locked time.Duration `json:"locked_ns"`
}

// CitusReport is what Apply did for Citus; nil on plain PostgreSQL.
type CitusReport struct {
	// Version is the citus extension's version.
	Version string `json:"version"`
	// OwnerLogin is true when this run allowed the owner role to log in.
	OwnerLogin bool `json:"owner_login"`
	// Tables are the tables this run distributed or converted.
	Tables []CitusTable `json:"tables"`
	// Delegated are the functions this run made delegated by tenant_id.
	Delegated []string `json:"delegated"`
	// Propagated are the functions this run created on every node.
	Propagated []string `json:"propagated"`
	// CoordinatorOnly are functions left on the coordinator: their
	// signature names a table Citus does not know.
	CoordinatorOnly []string `json:"coordinator_only"`
}

// ErrCitusWorker: migrate was pointed at a Citus worker, not the coordinator.
var ErrCitusWorker = errors.New("this is a Citus worker: migrate the coordinator")

// colocationAnchor is the table every distributed table is co-located with.
const colocationAnchor = "idem.identity"

// citusLayout is every table of the schema and where it goes, in the order
// the steps run (referenced tables before those that refer to them).
var citusLayout = []struct{ table, kind string }{
	{"idem.op_class", "reference"},
	{"idem.horizon_plan", "reference"},
	{"idem.horizon_pin", "reference"},
	{"idem.identity", "distributed"},
	{"idem.inbox_body", "distributed"},
	{"idem.pending_claim", "distributed"},
	{"idem.quarantine", "distributed"},
	{"idem.imported_hash", "distributed"},
	{"idem.audit_head", "local"},
	{"idem.audit", "local"},
	{"idem.person", "local"},
	{"idem.person_login", "local"},
	{"idem.horizon_source", "local"},
	{"idem.horizon_correction", "local"},
	{"idem.horizon_batch", "local"},
	{"idem.redrive_host", "local"},
	{"idem.horizon_enum", "local"},
	{"idem.database_identity", "local"},
	{"idem.governed_change", "local"},
	{"idem.bulk_preview", "local"},
	{"idem.entry_plan", "local"},
	{"idem.entry_item", "local"},
	{"idem.import_chunk", "local"},
}

// delegatedFunctions run on the node that holds their tenant's shard.
var delegatedFunctions = []string{
	"idem.execute(text,text,text,text,text,jsonb)",
	"idem.claim(text,text,text,text,text,jsonb)",
	"idem.complete(text,text,jsonb)",
}

// citusVersion returns the citus extension's version, "" when it is not
// installed in conn's database.
func citusVersion(ctx context.Context, conn *pgx.Conn) (string, error) {
	var v string
	err := conn.QueryRow(ctx, "SELECT extversion FROM pg_extension WHERE extname = 'citus'").Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("look for the citus extension: %w", err)
	}
	return v, nil
}

// citusPrepare runs before the schema is created as the owner: it refuses a
// worker, lets the owner role log in (Citus connects to the workers as it)
// and allows the code package's triggers on distributed tables for this
// session. It returns nil when citus is not installed.
func citusPrepare(ctx context.Context, conn *pgx.Conn, r Roles) (*CitusReport, error) {
	version, err := citusVersion(ctx, conn)
	if err != nil || version == "" {
		return nil, err
	}
	rep := &CitusReport{Version: version}
	var coordinator bool
	if err := conn.QueryRow(ctx, "SELECT citus_is_coordinator()").Scan(&coordinator); err != nil {
		return nil, fmt.Errorf("citus: is this the coordinator: %w", err)
	}
	if !coordinator {
		return nil, fmt.Errorf("%w: %w", ErrNotInstallable, ErrCitusWorker)
	}
	var login bool
	if err := conn.QueryRow(ctx, "SELECT rolcanlogin FROM pg_roles WHERE rolname = $1", r.Owner).Scan(&login); err != nil {
		return nil, fmt.Errorf("citus: read role %s: %w", r.Owner, err)
	}
	if !login {
		if _, err := conn.Exec(ctx, "ALTER ROLE "+quote(r.Owner)+" LOGIN"); err != nil {
			return nil, fmt.Errorf("%w: citus: allow %s to log in (Citus connects to the workers as it): %v", ErrNotInstallable, r.Owner, err)
		}
		rep.OwnerLogin = true
	}
	// The code package's triggers run on each shard and read only their own
	// shard's row or co-located ones (see the code files).
	// DDL on a distributed table may not follow a parallel read of it in one
	// transaction (the code package's installation does both).
	if _, err := conn.Exec(ctx, "SET citus.enable_unsafe_triggers = on; SET citus.multi_shard_modify_mode = sequential"); err != nil {
		return nil, fmt.Errorf("citus: %w", err)
	}
	return rep, nil
}

// citusTables places the tables (see the top of this file). It runs as the
// connecting superuser, after the code package. A table made a Citus local
// table is renamed into its own shard (Citus keeps the data where it is and
// puts a shell in its place), and a function created before names the
// shard's row type in its signature: such functions are marked for the code
// package to install again (Apply does, at once).
func citusTables(ctx context.Context, conn *pgx.Conn, shardCount int, rep *CitusReport) error {
	for _, t := range citusLayout {
		now, err := citusTableKind(ctx, conn, t.table)
		if err != nil {
			return err
		}
		// A table with a foreign key to a reference table became a Citus
		// local table when that one was made (horizon_batch): it moves on.
		if now == t.kind || now == "distributed" || now == "reference" {
			continue
		}
		ct, err := citusPlace(ctx, conn, t.table, t.kind, shardCount)
		if err != nil {
			return err
		}
		rep.Tables = append(rep.Tables, ct)
	}
	_, err := conn.Exec(ctx, `
		DELETE FROM idem.code_object o
		WHERE o.object LIKE 'function %'
		  AND EXISTS (SELECT 1 FROM pg_depend d JOIN pg_type t ON t.oid = d.refobjid
		              JOIN pg_dist_shard s ON t.typrelid = to_regclass(s.logicalrelid::text || '_' || s.shardid)
		              WHERE d.classid = 'pg_proc'::regclass AND d.refclassid = 'pg_type'::regclass
		                AND d.objid = to_regprocedure(substr(o.object, 10)))`)
	if err != nil {
		return fmt.Errorf("citus: mark the functions that name a shard's row type: %w", err)
	}
	return nil
}

// citusFunctions creates the schema's functions on every node and delegates
// the executor's (see the top of this file). It runs as the connecting
// superuser, after the code package.
func citusFunctions(ctx context.Context, conn *pgx.Conn, r Roles, rep *CitusReport) error {
	if err := citusSwapSequence(ctx, conn, r); err != nil {
		return err
	}
	if err := citusPropagateFunctions(ctx, conn, rep); err != nil {
		return err
	}
	for _, fn := range delegatedFunctions {
		var delegated bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_dist_object o
			WHERE o.classid = 'pg_proc'::regclass AND o.objid = $1::regprocedure
			  AND o.distribution_argument_index = 0 AND o.force_delegation
			  AND o.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = $2::regclass))`,
			fn, colocationAnchor).Scan(&delegated); err != nil {
			return fmt.Errorf("citus: is %s delegated: %w", fn, err)
		}
		if delegated {
			continue
		}
		if _, err := conn.Exec(ctx, `SELECT create_distributed_function($1::regprocedure, 'tenant_id',
			colocate_with := $2, force_delegation := true)`, fn, colocationAnchor); err != nil {
			return fmt.Errorf("citus: delegate %s by tenant_id: %w", fn, err)
		}
		rep.Delegated = append(rep.Delegated, fn)
	}
	return nil
}

// citusTableKind says what Citus makes of table: "" for a plain table.
func citusTableKind(ctx context.Context, conn *pgx.Conn, table string) (string, error) {
	var kind string
	err := conn.QueryRow(ctx, `SELECT CASE partmethod WHEN 'h' THEN 'distributed'
			WHEN 'n' THEN CASE repmodel WHEN 't' THEN 'reference' ELSE 'local' END END
		FROM pg_dist_partition WHERE logicalrelid = $1::regclass`, table).Scan(&kind)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("citus: read %s: %w", table, err)
	}
	return kind, nil
}

// citusPlace distributes, replicates or converts one table, timing the step.
func citusPlace(ctx context.Context, conn *pgx.Conn, table, kind string, shardCount int) (CitusTable, error) {
	ct := CitusTable{Table: table, Kind: kind}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&ct.Rows); err != nil {
		return ct, fmt.Errorf("citus: count %s: %w", table, err)
	}
	var sql string
	var args []any
	switch {
	case kind == "reference":
		sql, args = "SELECT create_reference_table($1)", []any{table}
	case kind == "local":
		sql, args = "SELECT citus_add_local_table_to_metadata($1, cascade_via_foreign_keys := true)", []any{table}
	case table == colocationAnchor && shardCount > 0:
		sql, args = "SELECT create_distributed_table($1, 'tenant_id', colocate_with := 'none', shard_count := $2)", []any{table, shardCount}
	case table == colocationAnchor:
		sql, args = "SELECT create_distributed_table($1, 'tenant_id', colocate_with := 'none')", []any{table}
	default:
		sql, args = "SELECT create_distributed_table($1, 'tenant_id', colocate_with := $2)", []any{table, colocationAnchor}
	}
	began := time.Now()
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		return ct, fmt.Errorf("citus: make %s a %s table: %w", table, kind, err)
	}
	ct.Locked = time.Since(began)
	return ct, nil
}

// citusSwapSequence creates idem.body_swap_xid on every worker: the
// executor's snapshot check reads it where it runs. (Citus does not
// propagate a sequence that no distributed table uses; a worker added later
// gets it from the next migrate.)
func citusSwapSequence(ctx context.Context, conn *pgx.Conn, r Roles) error {
	cmd := "CREATE SEQUENCE IF NOT EXISTS idem.body_swap_xid AS bigint MINVALUE 0 START 0; " +
		"ALTER SEQUENCE idem.body_swap_xid OWNER TO " + quote(r.Owner) + "; " +
		"REVOKE ALL ON SEQUENCE idem.body_swap_xid FROM PUBLIC"
	rows, err := conn.Query(ctx, "SELECT nodename || ':' || nodeport, success, result FROM run_command_on_workers($1)", cmd)
	if err != nil {
		return fmt.Errorf("citus: create idem.body_swap_xid on the workers: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var node, result string
		var ok bool
		if err := rows.Scan(&node, &ok, &result); err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("citus: create idem.body_swap_xid on %s: %s", node, result)
		}
	}
	return rows.Err()
}

// citusPropagateFunctions creates on every node each function of the schema
// that is not there yet, unless its signature names a table Citus does not
// know (the function then stays on the coordinator, where it is called).
// The code package creates functions before the tables are distributed, and
// Citus leaves on the coordinator those whose signature names one of them.
func citusPropagateFunctions(ctx context.Context, conn *pgx.Conn, rep *CitusReport) error {
	rows, err := conn.Query(ctx, `
		SELECT p.oid::regprocedure::text,
		       NOT EXISTS (SELECT 1 FROM pg_depend d JOIN pg_type t ON t.oid = d.refobjid
		                   WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
		                     AND d.refclassid = 'pg_type'::regclass AND t.typrelid <> 0
		                     AND NOT EXISTS (SELECT 1 FROM pg_dist_partition x WHERE x.logicalrelid = t.typrelid))
		FROM pg_proc p
		WHERE p.pronamespace = 'idem'::regnamespace
		  AND NOT EXISTS (SELECT 1 FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid)
		ORDER BY 1`)
	if err != nil {
		return fmt.Errorf("citus: list functions: %w", err)
	}
	type fn struct {
		name string
		ok   bool
	}
	var fns []fn
	for rows.Next() {
		var f fn
		if err := rows.Scan(&f.name, &f.ok); err != nil {
			return err
		}
		fns = append(fns, f)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, f := range fns {
		if !f.ok {
			rep.CoordinatorOnly = append(rep.CoordinatorOnly, f.name)
			continue
		}
		if _, err := conn.Exec(ctx, "SELECT create_distributed_function($1::regprocedure)", f.name); err != nil {
			return fmt.Errorf("citus: create %s on every node: %w", f.name, err)
		}
		rep.Propagated = append(rep.Propagated, f.name)
	}
	return nil
}

// Summary is the report in lines an operator reads.
func (c *CitusReport) Summary() []string {
	if c == nil {
		return nil
	}
	var out []string
	if c.OwnerLogin {
		out = append(out, "citus: the owner role may now log in (Citus connects to the workers as it); it has no password")
	}
	for _, t := range c.Tables {
		what := map[string]string{
			"distributed": "distributed by tenant_id, co-located with " + colocationAnchor,
			"reference":   "a reference table (a copy on every node)",
			"local":       "a Citus local table on the coordinator",
		}[t.Kind]
		out = append(out, fmt.Sprintf("citus: %s is %s: %d rows, writes to it blocked for %s", t.Table, what, t.Rows,
			t.Locked.Round(time.Millisecond)))
	}
	for _, f := range c.Delegated {
		out = append(out, "citus: "+f+" runs on the node of its tenant_id (force_delegation)")
	}
	if n := len(c.Propagated); n > 0 {
		out = append(out, fmt.Sprintf("citus: %d function(s) created on every node", n))
	}
	if n := len(c.CoordinatorOnly); n > 0 {
		out = append(out, fmt.Sprintf("citus: %d function(s) left on the coordinator only: %s", n, strings.Join(c.CoordinatorOnly, ", ")))
	}
	return out
}
