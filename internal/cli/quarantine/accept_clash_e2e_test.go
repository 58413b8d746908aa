package quarantine_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// takeOperationID records operation op of tenant-0 with a payload of its
// own, as the service would: the id a rule gives a record is then in use.
func takeOperationID(t *testing.T, dsn, op string) {
	t.Helper()
	dbtest.Admin(t, dsn, fmt.Sprintf(`SELECT idem.execute('tenant-0', '%s', 'demo.transfer', p, 'jcs-sha256:' || encode(sha256(convert_to(p, 'UTF8')), 'hex'), NULL)
		FROM (VALUES ('{"amount":77,"currency":"EUR","from":"alice","to":"zoe"}')) v(p)`, op))
}

// A bulk accept-as-new whose rule gives a record a new operation id that
// another payload already holds can never run that record: the preview
// (and its dry run) names it and nothing is planned; a plan whose id was
// taken after planning is not approved, and its show says so; a run that
// meets an id taken after approval fails without claiming "0 record(s)
// ran ... audit rows 0-0".
func TestBulkAcceptRefusesANewIDAlreadyInUse(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	dbtest.SeedConflicts(t, fx.DSN, dbtest.ClientBug{Prefix: "c-", N: 5, Change: "amount", Source: "clash"})
	bob := dbtest.As(fx.DSN, dbtest.Operator2)
	takeOperationID(t, fx.DSN, "c-00004-rev2")
	plans := fx.Count(t, "SELECT count(*) FROM idem.quarantine_bulk_accept")
	accept := []string{"quarantine", "accept-as-new", "--source", "clash", "--rule", "{operation_id}-rev2", "--max", "5", "--reason", "revisions"}

	code, out, errOut := runQ(t, fx.DSN, append(accept, "--dry-run")...)
	assert.Equal(t, cmdutil.ExitInvalid, code, "the dry run predicts the refusal: %s", errOut)
	assert.Contains(t, errOut, "cannot run: record")
	assert.Contains(t, errOut, "(tenant-0/c-00004): new operation id 'c-00004-rev2' is already held by another payload")
	assert.NotContains(t, errOut, "dry run: nothing planned\n", "it does not say all is well")
	assert.Contains(t, out, `"clashes":[{"id":`, "its JSON names the record too")
	code, out, errOut = runQ(t, fx.DSN, accept...)
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, errOut, "1 of 5 record(s) cannot run under {operation_id}-rev2")
	assert.Contains(t, errOut, "nothing was planned")
	assert.NotContains(t, out, "It will apply")
	assert.Equal(t, plans, fx.Count(t, "SELECT count(*) FROM idem.quarantine_bulk_accept"), "nothing planned")

	// The database refuses it for every caller, not only for idemctl's preview.
	ids := dbtest.Column[int64](t, fx.Pool, "SELECT id FROM idem.quarantine WHERE operation_id LIKE 'c-%' ORDER BY id")
	require.Len(t, ids, 5)
	alice := dbtest.PoolAs(t, fx.DSN, dbtest.Operator, 1)
	_, err := alice.Exec(fx.Ctx, `SELECT idem.quarantine_bulk_accept_plan($1, '{operation_id}-rev2', 5, 'alice', 'revisions', '{}')`, ids)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot run: new operation id 'c-00004-rev2' is already held")

	// Planned while the ids were free; one is taken before the approval.
	rule := []string{"quarantine", "accept-as-new", "--source", "clash", "--rule", "{operation_id}-rev3", "--max", "5", "--reason", "revisions", "-o", "json"}
	code, out, errOut = runQ(t, fx.DSN, rule...)
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	id := fmt.Sprint(jsonLines(t, out)[0]["id"])
	takeOperationID(t, fx.DSN, "c-00002-rev3")
	code, out, errOut = runQ(t, fx.DSN, "quarantine", "bulk", "show", id, "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "1 record(s) CANNOT RUN")
	assert.Contains(t, out, "c-00002-rev3 (CANNOT RUN: id held)")
	code, _, errOut = runQ(t, bob, "quarantine", "bulk", "approve", id, "--yes")
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, errOut, "cannot run: new operation id 'c-00002-rev3' is already held")
	assert.Equal(t, "planned", fx.State(t, id), "not approved")
	code, _, errOut = runQ(t, fx.DSN, "quarantine", "bulk", "abort", id, "--reason", "id taken")
	require.Equal(t, cmdutil.ExitOK, code, errOut)

	// Approved while the ids were free; one is taken before the run.
	rule[5] = "{operation_id}-rev4"
	code, out, errOut = runQ(t, fx.DSN, rule...)
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	id = fmt.Sprint(jsonLines(t, out)[0]["id"])
	code, _, errOut = runQ(t, bob, "quarantine", "bulk", "approve", id, "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	takeOperationID(t, fx.DSN, "c-00001-rev4")
	postings := fx.Count(t, "SELECT count(*) FROM demo.posting")
	code, out, errOut = runQ(t, fx.DSN, "quarantine", "bulk", "run", id, "--yes")
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, errOut, "choose an unused new operation id")
	assert.NotContains(t, out, "ran as new operations", "a failed run does not report a run")
	assert.NotContains(t, out, "audit rows 0-0")
	assert.Equal(t, postings, fx.Count(t, "SELECT count(*) FROM demo.posting"), "the failing batch ran nothing")
}
