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

// rv finding: marking a manual correction done is a governed change (one
// person plans it, another approves it). `inspect --history` tells it as
// "correction id N done by LABEL", LABEL being the planner's --operator text
// (recovery/sql/history_local.sql: c.done_by), which anyone types: alice
// plans it as "mallory", bob approves, and the identity's story says
// mallory did it, naming neither person nor login. Where four eyes count, a
// screen shows the person and the login (docs/governance.md, the brief).
func TestRVCorrectionDoneNamesThePersons(t *testing.T) {
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
	assert.NotContains(t, done, "mallory", "a label, typed by the planner, stands for who did it")
	assert.Contains(t, done, dbtest.PersonOperator+" ("+string(dbtest.Operator)+")", "the planner's person and login")
	assert.Contains(t, done, dbtest.PersonOperator2+" ("+string(dbtest.Operator2)+")", "the approver's person and login")
}
