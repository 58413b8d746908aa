package tui

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/recovery"
	"github.com/idemctl/idemctl/redrive"
)

// The resolve screen driven through the root model (the harness: model_test.go).

func resolveInput(h *harness, tenant, op, payload string) {
	resolveInputClass(h, tenant, op, "demo.transfer", payload)
}

func resolveInputClass(h *harness, tenant, op, class, payload string) {
	h.keys("2", "e")
	h.typ(tenant)
	h.keys("tab")
	h.typ(op)
	h.keys("tab")
	h.typ(class)
	h.keys("tab", "tab")
	h.typ(payload)
	h.keys("esc")
}

func countRows(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

func TestModelResolveStepByStep(t *testing.T) {
	t.Parallel()
	h := setup(t)
	seedConflict(t, h.pool, "acme", "charge-42", transfer100, transfer1000)
	h.init()
	inbox, quar := countRows(t, h.pool, "idem.inbox"), countRows(t, h.pool, "idem.quarantine")

	// Dry run (the default) of a conflicting payload: would_conflict, nothing written.
	resolveInput(h, "acme", "charge-42", `{"amount": 7, "currency":"EUR", "from":"acct-1","to":"acct-2"}`)
	h.keys("enter")
	v := h.view()
	assert.Contains(t, v, "DRY RUN")
	assert.Contains(t, v, "[ok] 1 Primary check")
	assert.Contains(t, v, "[ok] 2 Lookup")
	assert.Contains(t, v, "[!!] 3 Hash comparison")
	assert.Contains(t, v, "outcome would_conflict")
	assert.Equal(t, inbox, countRows(t, h.pool, "idem.inbox"))
	assert.Equal(t, quar, countRows(t, h.pool, "idem.quarantine"))

	// The same payload in another key order and spacing: the canonical hash
	// is equal, so it was already applied.
	h.keys("esc", "c")
	resolveInput(h, "acme", "charge-42", `{ "to":"acct-2", "currency":"EUR", "amount":100, "from":"acct-1" }`)
	h.keys("enter")
	assert.Contains(t, h.view(), "outcome already_applied")

	// A real run of an absent identity asks first, then applies it and shows
	// the saved response.
	h.keys("esc", "c")
	resolveInput(h, "acme", "charge-44", transfer100)
	h.keys("d", "enter")
	assert.Contains(t, h.view(), "Confirm a REAL run")
	assert.Equal(t, inbox, countRows(t, h.pool, "idem.inbox"), "nothing before the confirmation")
	h.keys("y")
	v = h.view()
	assert.Contains(t, v, "[ok] 4 Execute")
	assert.Contains(t, v, "outcome applied")
	assert.Contains(t, v, `"posting_id"`)
	assert.Equal(t, inbox+1, countRows(t, h.pool, "idem.inbox"))

	// A real run of a conflicting payload: quarantined; o opens the record.
	h.keys("esc", "c")
	resolveInput(h, "acme", "charge-42", `{"from":"acct-1","to":"acct-2","amount":5,"currency":"EUR"}`)
	h.keys("d", "enter", "y")
	v = h.view()
	assert.Contains(t, v, "outcome conflict")
	assert.Contains(t, v, "[!!] 5 Quarantine")
	require.NotNil(t, h.m.resolve.Form().Result)
	qid := h.m.resolve.Form().Result.QuarantineID
	assert.Greater(t, qid, int64(0))
	assert.Equal(t, quar+1, countRows(t, h.pool, "idem.quarantine"))
	h.keys("o")
	assert.Equal(t, TabQueue, h.m.Active())
	assert.Contains(t, h.view(), "#"+itoa(qid)+"  acme/charge-42")
	assert.Contains(t, h.view(), "incoming  5")

	// Runs are recorded like idemctl resolve's (the dry runs too): a start
	// before it reads, then the run, as many of each.
	acts := auditActions(t, h.pool)
	assert.Contains(t, acts, "alice resolve.run resolve:tui")
	assert.Contains(t, acts, "alice resolve.start resolve:tui")
	starts, runs := 0, 0
	for _, a := range acts {
		starts += strings.Count(a, " resolve.start ")
		runs += strings.Count(a, " resolve.run ")
	}
	assert.Equal(t, runs, starts, "every run writes both: %v", acts)
}

func TestModelResolveRefusesStandby(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.init()
	// A read-only session stands in for a standby: step 1 refuses.
	dbtest.Admin(t, h.dsn, "ALTER DATABASE "+currentDB(t, h.pool)+" SET default_transaction_read_only = on")
	h.pool.Reset()
	resolveInput(h, "acme", "charge-1", transfer100)
	h.keys("enter")
	v := h.view()
	assert.Contains(t, v, "[xx] 1 Primary check")
	assert.Contains(t, v, "refused")
	assert.Contains(t, v, "[--] 2 Lookup")
	assert.ErrorIs(t, func() error { _, err := recovery.CheckPrimary(context.Background(), h.pool); return err }(), recovery.ErrNotPrimary)
}

func currentDB(t *testing.T, pool *pgxpool.Pool) string {
	var name string
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT quote_ident(current_database())").Scan(&name))
	return name
}

func TestModelResolveRedrive(t *testing.T) {
	t.Parallel()
	h := setup(t)
	svc := &demo.Service{Pool: dbtest.PoolAs(t, h.dsn, dbtest.App, 4), Faults: demo.Faults{FailBeforeCommit: true}}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	_, err := redrive.Set(context.Background(), h.pool, demo.AppClass,
		&redrive.Config{Kind: redrive.KindHTTP, URL: srv.URL + "/transfers"}, true, "alice")
	require.NoError(t, err)
	h.init()
	resolveInputClass(h, "acme", "app-1", demo.AppClass, transfer100)
	h.keys("enter")
	assert.Contains(t, h.view(), "outcome would_redrive")
	h.keys("esc", "c")
	resolveInputClass(h, "acme", "app-1", demo.AppClass, transfer100)
	h.keys("d", "enter", "y")
	v := h.view()
	assert.Contains(t, v, "re-driven through its service")
	assert.Contains(t, v, "500, 200")
	assert.Contains(t, v, "primary  applied")
	assert.Contains(t, v, "outcome applied")
	assert.Contains(t, v, `"charge_id"`)
}
