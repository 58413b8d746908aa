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
	var ids []int64
	rows, err := w.operator.Query(w.ctx, "SELECT id FROM idem.quarantine ORDER BY id")
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	require.Len(t, ids, 4)
	before := w.snapshot()

	// The internal step, called directly with a forged row.
	forge := `SELECT idem.quarantine_reject_record(q, 'mallory', 'forged', '{"bulk_run":"x"}') FROM idem.quarantine q WHERE q.id = $1`
	_, err = w.operator.Exec(w.ctx, forge, ids[0])
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
		ids).Scan(&again))
	assert.Equal(t, 3, again)
	after := w.snapshot()
	assert.Equal(t, before["audit"]+4, after["audit"], "one audit row per decided record, no more")
	var persons []string
	rows, err = w.operator.Query(w.ctx, "SELECT person FROM idem.audit WHERE action = 'quarantine.reject' ORDER BY id")
	require.NoError(t, err)
	for rows.Next() {
		var p string
		require.NoError(t, rows.Scan(&p))
		persons = append(persons, p)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{dbtest.PersonOperator, dbtest.PersonOperator, dbtest.PersonOperator, dbtest.PersonOperator2}, persons)
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
