package inspect_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/clitest"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// Marking a manual correction done is a governed change (one person plans
// it, another approves it). `inspect --history` tells it by the change's
// persons and logins, not by the planner's --operator label, which anyone
// types: alice plans it as "mallory", bob approves, and the identity's story
// names both persons with their logins, and not mallory. The correction's
// adder is named by person and login too.
func TestHistoryNamesTheCorrectionsPersons(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	bob := dbtest.As(fx.DSN, dbtest.Operator2)
	code, _, errOut := runQ(t, fx.DSN, "corrections", "add", "--tenant", "acme", "--op", "c-1", "--reason", "refund REF-9 pending", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, out, errOut := runQ(t, fx.DSN, "corrections", "done", "1", "--operator", "mallory", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	change := jsonLines(t, out)[0]["id"]
	code, _, errOut = clitest.Run(t, bob, "", "change", "approve", fmt.Sprint(change), "--yes", "--operator", "bob")
	require.Equal(t, cmdutil.ExitOK, code, errOut)

	code, out, errOut = runQ(t, fx.DSN, "inspect", "--tenant", "acme", "--op", "c-1", "--history", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	var done string
	for _, e := range jsonLines(t, out) {
		if e["event"] == "correction done" {
			done = e["detail"].(string)
		}
	}
	require.NotEmpty(t, done, out)
	for _, e := range jsonLines(t, out) {
		if e["event"] == "correction" {
			assert.Contains(t, e["detail"], "added by "+dbtest.PersonOperator+" ("+string(dbtest.Operator)+")", "the adder's person and login")
		}
	}
	assert.NotContains(t, done, "mallory", "a label, typed by the planner, stands for who did it")
	assert.Contains(t, done, dbtest.PersonOperator+" ("+string(dbtest.Operator)+")", "the planner's person and login")
	assert.Contains(t, done, dbtest.PersonOperator2+" ("+string(dbtest.Operator2)+")", "the approver's person and login")
}
