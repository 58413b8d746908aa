package tui

import (
	"bytes"
	"context"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
	"github.com/idemctl/idemctl/tui/styles"
)

// approvalsScreen is a teatest program over the database services as
// operator, on pool's login.
func approvalsScreen(t *testing.T, pool *pgxpool.Pool, operator string) *screen {
	t.Helper()
	st := styles.Ascii()
	m := New(Options{
		Services: PoolServices(pool), Operator: operator, Database: "postgres@127.0.0.1:5432/test",
		Now: time.Now, Styles: &st, Refresh: -1, StepDelay: -1, Timeout: 20 * time.Second,
	})
	return newScreen(t, m, 120, 40)
}

// The console's Approvals view shows an accept-as-new plan of a money class
// with, per record, its changed fields and the totals per currency the run
// applies (computed here in SQL from the payloads), and a record plan's
// evidence and totals; the planner's approval is refused, another person's
// confirmation shows the totals again and approves.
func TestApprovalsViewShowsChangesAndMoneyTotals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, dsn := dbtest.NewPool(t, 4)
	bob := dbtest.PoolAs(t, dsn, dbtest.Operator2, 4)
	dbtest.SeedConflicts(t, dsn,
		dbtest.ClientBug{Prefix: "e-", N: 3, Change: "amount", Source: "psp"},
		dbtest.ClientBug{Prefix: "u-", N: 2, Change: "currency", Source: "psp"})
	_, err := governance.SetMoney(ctx, pool, "demo.transfer", &governance.Money{Amount: "/amount", Currency: "/currency", Unit: "minor"}, "alice", "")
	require.NoError(t, err)
	ids := dbtest.Column[int64](t, pool, "SELECT id FROM idem.quarantine ORDER BY id")
	plan, err := quarantine.PlanAccept(ctx, pool, quarantine.Selection{IDs: ids}, 0, "{operation_id}-rev2", 10, "alice", "revisions")
	require.NoError(t, err)
	want := map[string]string{}
	rows, err := pool.Query(ctx, `SELECT incoming_payload::jsonb ->> 'currency', sum((incoming_payload::jsonb ->> 'amount')::numeric)::bigint, count(*)
		FROM idem.quarantine GROUP BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var cur string
		var minor int64
		var n int
		require.NoError(t, rows.Scan(&cur, &minor, &n))
		want[cur] = fmt.Sprintf("%s %s over %d records", cur, big.NewRat(minor, 100).FloatString(2), n)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]string{"EUR": "EUR 3000.06 over 3 records", "USD": "USD 0.03 over 2 records"}, want)
	want["EUR"] = "EUR 3,000.06 over 3 records" // thousands grouped on screen
	raw := []byte(`{"tenant_id":"t1","operation_id":"psp-1","class":"demo.transfer","payload":{"amount":900,"currency":"EUR","from":"alice","to":"bob"}}`)
	canon, hash, err := idem.Canonicalize([]byte(`{"to":"bob","from":"alice","amount":900,"currency":"EUR"}`), idem.PayloadLimits{})
	require.NoError(t, err)
	_, err = governance.PlanEntry(ctx, pool, governance.EntryOptions{Kind: governance.EntryRecord, Source: "charges.ndjson",
		SourceDigest: governance.DigestOf(raw), Operator: "alice", Reason: "INC-9", Contract: "PSP-7", Correction: "LC-12"},
		[]governance.EntryItem{{TenantID: "t1", OperationID: "psp-1", Class: "demo.transfer", Payload: string(canon),
			PayloadHash: hash, Response: []byte(`{"status":"charged"}`), Evidence: "psp ch_9"}})
	require.NoError(t, err)

	// The planner: the plan and its totals, each record's changes, and the
	// refusal.
	s := approvalsScreen(t, pool, "alice")
	s.waitFor("6 Approvals")
	s.keys("6")
	// PLANNED is the person with the login, whole (the column was 10 wide).
	s.waitForAll(want["EUR"], "EUR 9.00 over 1 record", dbtest.PersonOperator+" ("+string(dbtest.Operator)+")")
	s.keys("enter")
	s.waitForAll("/amount: 1 -> 100001", `/currency: "EUR" -> "USD"`, "e-00003-rev2", want["USD"])
	s.keys("esc", "a")
	s.waitFor(fmt.Sprintf("Confirm: approve accept-as-new plan #%d", plan.ID))
	s.keys("y")
	s.waitFor(fmt.Sprintf("refused: you planned accept-as-new plan #%d", plan.ID))
	s.keys("q")
	require.NoError(t, s.tm.Quit())

	// Another person: the confirmation shows the totals and each record's
	// changes; then the approval.
	s = approvalsScreen(t, bob, "bob")
	s.waitFor("6 Approvals")
	s.keys("6")
	s.waitFor(want["EUR"])
	s.keys("a")
	s.waitForAll(fmt.Sprintf("Confirm: approve accept-as-new plan #%d", plan.ID), want["USD"], "/amount: 2 -> 100002", "u-00002-rev2")
	s.keys("y")
	s.waitForAll(fmt.Sprintf("accept-as-new plan #%d approved by bob", plan.ID), "1 waiting for a second person")
	// The plans waiting for a second person come first: the record plan.
	s.keys("g", "enter")
	s.waitForAll("psp ch_9", "EUR 9.00")
	s.keys("q")
	require.NoError(t, s.tm.Quit())
	var state, approver string
	require.NoError(t, pool.QueryRow(ctx, "SELECT state, approved_person FROM idem.quarantine_bulk_accept WHERE id = $1", plan.ID).Scan(&state, &approver))
	assert.Equal(t, "approved", state)
	assert.Equal(t, "bob", approver)
}

// waitForAll waits until the program has drawn every one of texts (in one
// frame or several: a wait reads what was drawn so far).
func (s *screen) waitForAll(texts ...string) {
	s.t.Helper()
	teatest.WaitFor(s.t, s.tm.Output(), func(b []byte) bool {
		for _, text := range texts {
			if !bytes.Contains(b, []byte(text)) {
				return false
			}
		}
		return true
	}, teatest.WithDuration(5*time.Second), teatest.WithCheckInterval(5*time.Millisecond))
}

// Accepting a record of a money class in the queue plans it (nothing runs)
// and says where another person approves it; the Approvals view then shows
// its change and the amount it would apply.
func TestModelAcceptAsNewOfAMoneyClassPlans(t *testing.T) {
	t.Parallel()
	h := setup(t)
	qid := seedConflict(t, h.pool, "acme", "charge-42", transfer100, transfer1000)
	_, err := governance.SetMoney(context.Background(), h.pool, "demo.transfer",
		&governance.Money{Amount: "/amount", Currency: "/currency", Unit: "minor"}, "alice", "")
	require.NoError(t, err)
	h.init()
	h.keys("enter", "a")
	h.typ("charge-42-rev2")
	h.keys("tab")
	h.typ("corrected amount, ticket PAY-7")
	h.keys("enter", "y")
	assert.Contains(t, h.view(), fmt.Sprintf("#%d is of a money class: planned as accept-as-new plan #1, nothing ran", qid))
	rec, err := quarantine.Show(context.Background(), h.pool, qid)
	require.NoError(t, err)
	assert.Equal(t, quarantine.StatusOpen, rec.Status, "nothing ran")

	h.keys("6")
	assert.Contains(t, h.view(), "EUR 10.00 over 1 record")
	h.keys("enter")
	v := h.view()
	assert.Contains(t, v, "/amount: 100 -> 1000")
	assert.Contains(t, v, "acme/charge-42 -> charge-42-rev2")
}
