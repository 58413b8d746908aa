package dbtest

import (
	"context"
	"encoding/json"
	"testing"
)

// PlanNode is one node of a query plan: its type ("Nested Loop", "Index
// Scan", ...) and the relation it reads, if any.
type PlanNode struct {
	Type     string
	Relation string
	Index    string
}

// Plan returns the nodes of the plan PostgreSQL chooses for sql with args
// (EXPLAIN (FORMAT JSON), the parameters bound: a custom plan unless the
// session forces generic ones), depth first.
func Plan(t testing.TB, q Querier, sql string, args ...any) []PlanNode {
	t.Helper()
	rows, err := q.Query(context.Background(), "EXPLAIN (FORMAT JSON) "+sql, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", sql, err)
	}
	var doc []byte
	for rows.Next() {
		if err := rows.Scan(&doc); err != nil {
			t.Fatalf("explain: %v", err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("explain %s: %v", sql, err)
	}
	type node struct {
		Type     string `json:"Node Type"`
		Relation string `json:"Relation Name"`
		Index    string `json:"Index Name"`
		Plans    []node `json:"Plans"`
	}
	var plans []struct{ Plan node }
	if err := json.Unmarshal(doc, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("explain %s: %v in %s", sql, err, doc)
	}
	var out []PlanNode
	var walk func(n node)
	walk = func(n node) {
		out = append(out, PlanNode{Type: n.Type, Relation: n.Relation, Index: n.Index})
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plans[0].Plan)
	return out
}

// ShapedInbox fills dsn's inbox as a busy service's looks (tenants tenants,
// perTenant identities each, class demo.transfer, spread evenly over the
// last days days, a partition a day), then gives the planner the worst
// statistics for a lookup by key: it believes each (tenant_id,
// operation_id) matches thousands of identities and bodies (few distinct
// operation ids), the over-estimate that once turned a batched lookup into
// a merge join over the whole inbox.
func ShapedInbox(t testing.TB, dsn string, tenants, perTenant, days int) {
	t.Helper()
	if err := Owner(dsn, "SELECT idem.inbox_body_ensure((now() AT TIME ZONE 'UTC')::date - $1::int, (now() AT TIME ZONE 'UTC')::date + 1)", days); err != nil {
		t.Fatalf("shaped inbox: partitions: %v", err)
	}
	err := Owner(dsn, `
		WITH rows AS (
		    SELECT 'tenant-' || t AS tenant, 'op-' || g AS op, '{"n":' || g || '}' AS payload,
		           now() - make_interval(days => $3) + (g * $1 + t) * (make_interval(days => $3) / ($1 * $2)) AS at
		    FROM generate_series(1, $1::int) t, generate_series(1, $2::int) g
		), ident AS (
		    INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest, created_at)
		    SELECT tenant, op, 'demo.transfer', sha256(convert_to(payload, 'UTF8')), at FROM rows
		    RETURNING 1
		)
		INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response)
		SELECT tenant, op, at, 'demo.transfer', payload, '{"ok":true}' FROM rows`, tenants, perTenant, days)
	if err != nil {
		t.Fatalf("shaped inbox: %v", err)
	}
	for _, sql := range []string{
		"ALTER TABLE idem.identity ALTER COLUMN operation_id SET (n_distinct = 3)",
		"ALTER TABLE idem.identity ALTER COLUMN tenant_id SET (n_distinct = 1)",
		"ALTER TABLE idem.inbox_body ALTER COLUMN operation_id SET (n_distinct = 3)",
		"ALTER TABLE idem.inbox_body ALTER COLUMN tenant_id SET (n_distinct = 1)",
		"ANALYZE idem.identity",
		"ANALYZE idem.inbox_body",
	} {
		if err := Owner(dsn, sql); err != nil {
			t.Fatalf("shaped inbox: %s: %v", sql, err)
		}
	}
}

// AssertProbes fails t unless nodes are a nested loop of index probes: no
// hash or merge join, no sort, no scan of a whole table of schema idem.
func AssertProbes(t testing.TB, nodes []PlanNode) {
	t.Helper()
	probes := 0
	for _, n := range nodes {
		switch n.Type {
		case "Hash Join", "Merge Join", "Hash", "Sort", "Materialize", "Seq Scan", "Bitmap Heap Scan", "Bitmap Index Scan":
			t.Errorf("plan has a %s (%s): %+v", n.Type, n.Relation, nodes)
			return
		case "Index Scan", "Index Only Scan":
			probes++
		}
	}
	if probes == 0 {
		t.Errorf("plan probes no index: %+v", nodes)
	}
}
