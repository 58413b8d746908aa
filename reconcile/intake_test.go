package reconcile_test

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/reconcile"
)

// dlqTable creates, as the superuser, the service's DLQ table (tenant_id,
// operation_id, ts, payload jsonb), fills it, lets the login sources read
// with select it, and registers it as the postgres source "dlq" with a
// four-column query.
func (f *fixture) dlqTable(rows ...string) {
	f.t.Helper()
	dbtest.Admin(f.t, f.dsn, "CREATE TABLE public.dlq (tenant_id text, operation_id text, ts timestamptz DEFAULT now(), payload jsonb); "+
		"GRANT SELECT ON public.dlq TO "+pgx.Identifier{string(dbtest.Nobody)}.Sanitize())
	for _, r := range rows {
		dbtest.Admin(f.t, f.dsn, "INSERT INTO public.dlq (tenant_id, operation_id, payload) VALUES "+r)
	}
	require.NoError(f.t, horizon.AddSource(f.ctx, f.pool, horizon.Source{Name: "dlq", Kind: horizon.KindPostgres,
		Config: horizon.SourceConfig{DSN: dbtest.SourceDSN(f.dsn), PasswordEnv: dbtest.SourcePasswordEnv,
			Query: "SELECT tenant_id, operation_id, ts, payload FROM public.dlq ORDER BY ts"}}, "alice"))
}

// archive writes an archive directory (files named .gz are gzipped) and
// registers it as the source "archive".
func (f *fixture) archive(files map[string][]string) {
	f.t.Helper()
	for name, lines := range files {
		f.file(filepath.Join("archive", name), lines...)
	}
	require.NoError(f.t, horizon.AddSource(f.ctx, f.pool, horizon.Source{Name: "archive", Kind: horizon.KindArchive,
		Config: horizon.SourceConfig{Dir: filepath.Join(f.dir, "archive")}}, "alice"))
}

// intake runs an intake and returns its summary, the identities of its
// batch (sorted) and the batch's text.
func (f *fixture) intake(source string) (reconcile.IntakeSummary, []string, []byte) {
	f.t.Helper()
	var buf bytes.Buffer
	sum, err := reconcile.Intake(f.ctx, f.pool, reconcile.IntakeConfig{Source: source, Class: "demo.transfer", Operator: "alice"},
		reconcile.NewBatchWriter(&buf))
	require.NoError(f.t, err)
	var ids []string
	for _, req := range readBatch(f.t, buf.Bytes()) {
		assert.Equal(f.t, "demo.transfer", req.Class)
		ids = append(ids, req.Tenant+"/"+req.OperationID)
	}
	sort.Strings(ids)
	return sum, ids, buf.Bytes()
}

// Intake from a DLQ table and from an archive directory, each holding
// present, absent and conflicting operations: the batch holds exactly the
// absent and conflicting ones, and says so of a message without a payload.
func TestIntakeFromDLQTableAndArchive(t *testing.T) {
	t.Parallel()
	f := setup(t)
	trs := f.smallLedger()
	changed := trs[3]
	changed.amount = 3001
	f.dlqTable(
		fmt.Sprintf("('acme', 'p-1', %s)", quote(trs[1].payload())),
		// the same payload, keys in another order: present
		`('acme', 'p-2', '{"currency":"EUR","to":"acct-EUR-b","from":"acct-EUR-a","amount":2000}')`,
		fmt.Sprintf("('acme', 'p-3', %s)", quote(changed.payload())),
		`('acme', 'n-1', '{"from":"acct-EUR-a","to":"acct-EUR-b","amount":7,"currency":"EUR"}')`,
		"('acme', 'n-2', NULL)",
		"('acme', 'p-4', NULL)",
		"('', 'broken', NULL)",
	)
	sum, lines, raw := f.intake("dlq")
	assert.Equal(t, []string{"acme/n-1", "acme/n-2", "acme/p-3"}, lines)
	assert.EqualValues(t, 7, sum.Messages)
	assert.Equal(t, map[reconcile.IntakeOutcome]int64{reconcile.Present: 2, reconcile.Absent: 1, reconcile.Conflicting: 1,
		reconcile.NoPayload: 1, reconcile.Unchecked: 1, reconcile.Unreadable: 1}, sum.Counts)
	assert.Contains(t, string(raw), `"operation_id":"n-2","class":"demo.transfer","payload":null`)
	assert.Contains(t, string(raw), "the source carries no payload: fill in the original payload before resolving")
	assert.Contains(t, string(raw), `"transport":{"at":"row 3","source":"dlq"}`)
	require.Len(t, sum.Problems, 1)
	assert.Contains(t, sum.Problems[0], "row 1: invalid identity: tenant_id is required", "rows in identity order")
	assert.EqualValues(t, 1, f.count("SELECT count(*) FROM idem.audit WHERE action = 'intake.run' AND target = 'source:dlq'"))

	// The horizon proof reads the same four-column query (and ignores the
	// payload); the broken row would fail it.
	dbtest.Admin(t, f.dsn, "DELETE FROM public.dlq WHERE tenant_id = ''")
	before := f.now().Add(-time.Hour)
	rep, err := horizon.Check(f.ctx, f.pool, horizon.CheckOptions{Class: "demo.transfer", Before: &before})
	require.NoError(t, err)
	for _, ev := range rep.Evidence {
		if ev.Source == "dlq" {
			assert.Equal(t, horizon.Enumerating, ev.Mode, ev.Reason)
			assert.EqualValues(t, 6, ev.Enumerated)
		}
	}

	f.archive(map[string][]string{
		"2026-11-01.ndjson": {
			fmt.Sprintf(`{"tenant":"acme","operation_id":"p-5","ts":"2026-11-01T10:00:00Z","payload":%s}`, trs[5].payload()),
			`{"tenant":"acme","operation_id":"n-3","ts":"2026-11-01T11:00:00Z","payload":{"from":"x","to":"y","amount":1,"currency":"EUR"}}`,
		},
		"late/2026-11-02.ndjson.gz": {
			`{"tenant":"acme","operation_id":"p-6","ts":"2026-11-02T10:00:00Z","payload":{"from":"x","to":"y","amount":1,"currency":"EUR"}}`,
		},
	})
	sum, lines, _ = f.intake("archive")
	assert.Equal(t, []string{"acme/n-3", "acme/p-6"}, lines)
	assert.Equal(t, map[reconcile.IntakeOutcome]int64{reconcile.Present: 1, reconcile.Absent: 1, reconcile.Conflicting: 1}, sum.Counts)

	_, err = reconcile.Intake(f.ctx, f.pool, reconcile.IntakeConfig{Source: "nope", Class: "demo.transfer", Operator: "alice"},
		reconcile.NewBatchWriter(io.Discard))
	assert.ErrorIs(t, err, horizon.ErrSourceNotFound)
	_, err = reconcile.Intake(f.ctx, f.pool, reconcile.IntakeConfig{Source: "manual", Class: "demo.transfer", Operator: "alice"},
		reconcile.NewBatchWriter(io.Discard))
	assert.ErrorIs(t, err, horizon.ErrNoMessages)
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Intake as messages come: the identity read from the body by JSON
// Pointers when the source lacks it, a line that is not JSON is an invalid
// message and the reading goes on; a postgres source's rows are numbered in
// identity order whatever its query's order.
func TestIntakeIdentityPointersAndBadMessages(t *testing.T) {
	t.Parallel()
	f := setup(t)
	trs := f.smallLedger()
	f.archive(map[string][]string{
		"2026-11-03.ndjson": {
			fmt.Sprintf(`{"ts":"2026-11-03T10:00:00Z","payload":{"tenant":"acme","id":"p-1","amount":%d}}`, trs[1].amount),
			`this is not JSON`,
			`{"ts":"2026-11-03T10:00:01Z","payload":{"tenant":"acme","id":"n-9","from":"x","to":"y","amount":1,"currency":"EUR"}}`,
			`{"ts":"2026-11-03T10:00:02Z","payload":{"id":7}}`,
			`{"tenant":"acme","operation_id":"n-8","ts":"2026-11-03T10:00:03Z","payload":{"from":"x","to":"y","amount":2,"currency":"EUR"}}`,
		},
	})
	var buf bytes.Buffer
	sum, err := reconcile.Intake(f.ctx, f.pool, reconcile.IntakeConfig{Source: "archive", Class: "demo.transfer", Operator: "alice",
		TenantPtr: "/tenant", OpPtr: "/id"}, reconcile.NewBatchWriter(&buf))
	require.NoError(t, err)
	assert.EqualValues(t, 5, sum.Messages)
	assert.Equal(t, map[reconcile.IntakeOutcome]int64{reconcile.Conflicting: 1, reconcile.Absent: 2, reconcile.Unreadable: 2}, sum.Counts)
	require.Len(t, sum.Problems, 2)
	assert.Contains(t, sum.Problems[0], "2026-11-03.ndjson:2: not a JSON object")
	assert.Contains(t, sum.Problems[1], "2026-11-03.ndjson:4: no identity in the headers, and the body has no string at /tenant")

	f.dlqTable(
		`('globex', 'z-1', NULL)`,
		`(NULL, 'z-2', NULL)`,
		`('acme', 'z-3', NULL)`,
	)
	buf.Reset()
	sum, err = reconcile.Intake(f.ctx, f.pool, reconcile.IntakeConfig{Source: "dlq", Class: "demo.transfer", Operator: "alice"},
		reconcile.NewBatchWriter(&buf))
	require.NoError(t, err)
	assert.EqualValues(t, 3, sum.Messages)
	require.Len(t, sum.Problems, 1)
	assert.Equal(t, "row 3: tenant_id or operation_id is NULL", sum.Problems[0], "rows in (tenant, operation, ts) order, NULL last")
	assert.Contains(t, buf.String(), `"operation_id":"z-3","class":"demo.transfer","payload":null,"transport":{"at":"row 1"`)
}
