package attack_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
)

// Issue 16: a bulk decision cannot be forged, and bulk work never runs a
// conflicting payload. An operator cannot call the internal step that writes
// a decision without locking and checking the record; cannot record a bulk
// decision in the audit log without the decisions; cannot decide a record
// twice through a batch; and a service cannot decide at all. A bulk reject
// runs nothing; only a person's accept-as-new runs a conflicting payload.
func TestBulkDecisionCannotBeForged(t *testing.T) {
	t.Parallel()
	w := setup(t)
	dbtest.SeedConflicts(t, w.dsn, dbtest.ClientBug{Prefix: "f-", N: 4, Change: "amount", Source: "mobile"})
	ids := dbtest.Column[int64](t, w.operator, "SELECT id FROM idem.quarantine ORDER BY id")
	require.Len(t, ids, 4)
	before := w.snapshot()

	// The internal step, called directly with a forged row.
	forge := `SELECT idem.quarantine_reject_record(q, 'mallory', 'forged', '{"bulk_run":"x"}') FROM idem.quarantine q WHERE q.id = $1`
	_, err := w.operator.Exec(w.ctx, forge, ids[0])
	assert.Equal(t, "42501", code(err), "operator calls the internal step")
	_, err = w.app.Exec(w.ctx, forge, ids[0])
	assert.Equal(t, "42501", code(err), "service calls the internal step")
	_, err = w.app.Exec(w.ctx, "SELECT * FROM idem.quarantine_reject_batch($1, 'svc', 'no', 'bulk-x')", ids)
	assert.Equal(t, "42501", code(err), "a service decides nothing")
	_, err = w.auditor.Exec(w.ctx, "SELECT * FROM idem.quarantine_reject_batch($1, 'aud', 'no', 'bulk-x')", ids)
	assert.Equal(t, "42501", code(err), "an auditor decides nothing")
	_, err = w.operator.Exec(w.ctx, "SELECT idem.audit_append('alice', 'quarantine.reject', 'quarantine:1', '{\"bulk_run\":\"x\"}')")
	assert.Equal(t, "IX113", code(err), "a bulk decision's audit rows come only with the decisions")
	_, err = w.operator.Exec(w.ctx, "SELECT idem.audit_append('alice', 'quarantine.bulk_reject', '', '{}')")
	assert.Equal(t, "IX113", code(err))
	_, err = w.operator.Exec(w.ctx, "SELECT * FROM idem.quarantine_reject_batch($1, 'alice', 'x', 'bulk-x')", make([]int64, 1001))
	assert.Equal(t, "IX108", code(err), "a batch is bounded")
	_, err = w.operator.Exec(w.ctx, "SELECT * FROM idem.quarantine_reject_batch($1, 'alice', '', 'bulk-x')", ids)
	assert.Equal(t, "IX104", code(err), "a reason is required")
	_, err = w.operator.Exec(w.ctx, "SELECT * FROM idem.quarantine_reject_batch($1, 'alice', 'x', E'bulk\\x1b[2J')", ids)
	assert.Equal(t, "IX104", code(err), "the run label reaches terminals: no control characters")
	assert.Equal(t, before, w.snapshot(), "nothing written by any refusal")

	// A real batch decides each open record once, with its own audit row
	// naming the person; a second batch over the same ids decides nothing.
	postings := func() int {
		var n int
		require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT count(*) FROM demo.posting").Scan(&n))
		return n
	}
	posted := postings()
	var rejected, again int
	require.NoError(t, w.operator.QueryRow(w.ctx,
		"SELECT count(*) FILTER (WHERE outcome = 'rejected') FROM idem.quarantine_reject_batch($1, 'alice', 'INC-881', 'bulk-1')",
		ids[:3]).Scan(&rejected))
	assert.Equal(t, 3, rejected)
	require.NoError(t, w.second.QueryRow(w.ctx,
		"SELECT count(*) FILTER (WHERE outcome = 'already_rejected') FROM idem.quarantine_reject_batch($1, 'bob', 'again', 'bulk-2')",
		ids[:3]).Scan(&again))
	assert.Equal(t, 3, again)
	after := w.snapshot()
	assert.Equal(t, before["audit"]+3, after["audit"], "one audit row per decided record, no more")
	persons := dbtest.Column[string](t, w.operator, "SELECT person FROM idem.audit WHERE action = 'quarantine.reject' ORDER BY id")
	assert.Equal(t, []string{dbtest.PersonOperator, dbtest.PersonOperator, dbtest.PersonOperator}, persons)
	assert.Equal(t, posted, postings(), "rejecting runs nothing")

	// A conflicting replay stays blocked, rejected or open, until a person
	// accepts it as a new operation: only then does it run, once.
	for _, g := range []int{1, 4} {
		res, err := idem.Execute(w.ctx, w.app, idem.Command{
			Identity: idem.Identity{TenantID: "tenant-0", OperationID: fmt.Sprintf("f-%05d", g)}, Class: "demo.transfer",
			Payload: []byte(fmt.Sprintf(`{"amount":%d,"currency":"EUR","from":"alice","to":"bob"}`, 100000+g))})
		require.NoError(t, err)
		assert.Equal(t, idem.Conflict, res.Outcome, "replay of f-%d", g)
	}
	assert.Equal(t, posted, postings())
	acc, err := quarantine.AcceptAsNew(w.ctx, w.operator, ids[3], "f-00004-rev2", "alice", "a real correction")
	require.NoError(t, err)
	assert.Equal(t, idem.Applied, acc.Outcome)
	assert.Equal(t, posted+1, postings(), "the accepted payload ran once")
}

// Issue 16: a bulk accept-as-new runs conflicting payloads, so it needs two
// persons: nobody runs a plan that another person did not approve, nobody
// approves their own plan (whatever the label), nobody writes a plan or
// approves it by hand, and a service can do none of it.
func TestBulkAcceptNeedsAnotherPerson(t *testing.T) {
	t.Parallel()
	w := setup(t)
	dbtest.SeedConflicts(t, w.dsn, dbtest.ClientBug{Prefix: "b-", N: 3, Change: "amount", Source: "mobile"})
	ids := dbtest.Column[int64](t, w.operator, "SELECT id FROM idem.quarantine ORDER BY id")
	_, err := w.app.Exec(w.ctx, "SELECT idem.quarantine_bulk_accept_plan($1, '{operation_id}-r', 5, 'svc', 'x', '{}')", ids)
	assert.Equal(t, "42501", code(err), "a service plans nothing")
	unmapped := dbtest.PoolAs(t, w.dsn, dbtest.Unmapped, 2)
	_, err = unmapped.Exec(w.ctx, "SELECT idem.quarantine_bulk_accept_plan($1, '{operation_id}-r', 5, 'carol', 'x', '{}')", ids)
	assert.Equal(t, "IX313", code(err), "a login without a person plans nothing")

	plan, err := quarantine.PlanAccept(w.ctx, w.operator, quarantine.Selection{IDs: ids}, 0, "{operation_id}-rev2", 3, "alice", "revisions")
	require.NoError(t, err)
	before := w.snapshot()
	_, err = w.operator.Exec(w.ctx, "SELECT * FROM idem.quarantine_bulk_accept_run($1, 'alice', 10)", plan.ID)
	assert.Equal(t, "IX121", code(err), "not approved: nothing runs")
	for _, label := range []string{"bob", "not-alice"} {
		_, err = quarantine.ApproveAccept(w.ctx, w.operator, plan.ID, label)
		assert.ErrorIs(t, err, quarantine.ErrSamePerson, label)
	}
	_, err = w.operator.Exec(w.ctx, "UPDATE idem.quarantine_bulk_accept SET state = 'approved', approved_person = 'bob', approved_at = now()")
	assert.Equal(t, "42501", code(err), "an operator cannot approve by hand")
	_, err = w.operator.Exec(w.ctx, `INSERT INTO idem.quarantine_bulk_accept (rule, max_count, ids, reason, selection, planned_by,
		planned_person, planned_db_user, state, approved_person, approved_at) VALUES ('{operation_id}-x', 3, $1, 'x', '{}', 'a', 'alice', 'a',
		'approved', 'bob', now())`, ids)
	assert.Equal(t, "42501", code(err), "nor forge an approved plan")
	_, err = w.operator.Exec(w.ctx, "SELECT idem.quarantine_accept_record(q, 'b-x', 'alice', 'forged', '{}') FROM idem.quarantine q LIMIT 1")
	assert.Equal(t, "42501", code(err), "nor call the step that runs a payload")
	_, err = w.app.Exec(w.ctx, "SELECT * FROM idem.quarantine_bulk_accept_approve($1, 'svc')", plan.ID)
	assert.Equal(t, "42501", code(err))
	assert.Equal(t, before, w.snapshot(), "nothing ran, nothing was written")

	_, err = quarantine.ApproveAccept(w.ctx, w.second, plan.ID, "bob")
	require.NoError(t, err)
	res, err := quarantine.RunAccept(w.ctx, w.operator, plan.ID, "alice", 2, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(3), res.Decided)
	after := w.snapshot()
	assert.Equal(t, before["audit"]+1+3, after["audit"], "the approval and one audit row per record")
	assert.Equal(t, before["quarantine"], after["quarantine"])
	var accepted int
	require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT count(*) FROM idem.quarantine WHERE status = 'accepted' AND new_operation_id LIKE 'b-%-rev2'").Scan(&accepted))
	assert.Equal(t, 3, accepted)
	_, err = quarantine.RunAccept(w.ctx, w.operator, plan.ID, "alice", 2, nil)
	assert.ErrorIs(t, err, quarantine.ErrPlanState, "a done plan runs nothing again")
}
