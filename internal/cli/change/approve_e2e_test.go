package change_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/clitest"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// change approve confirms like the other approvals: without a terminal and
// without --yes it refuses in one line (exit 2) and applies nothing; on a
// terminal it shows the change and asks, "n" applies nothing (exit 1), "y"
// applies it; --yes applies without asking.
func TestChangeApproveAsksFirst(t *testing.T) {
	t.Parallel()
	db := dbtest.NewDatabase(t)
	alice, bob := dbtest.As(db, dbtest.Operator), dbtest.As(db, dbtest.Operator2)
	dbtest.RegisterAppClass(t, alice, "proj.view", "horizon")
	minAge := func() string {
		code, out, errOut := clitest.Run(t, alice, "", "class", "list", "-o", "json")
		require.Equal(t, cmdutil.ExitOK, code, errOut)
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, `"proj.view"`) {
				return l
			}
		}
		return ""
	}
	code, _, errOut := clitest.Run(t, alice, "", "class", "set", "proj.view", "--retention", "horizon", "--min-age", "30d", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, _, errOut = clitest.Run(t, alice, "", "class", "set", "proj.view", "--retention", "horizon", "--min-age", "1d",
		"--reason", "rebuilt daily now (CHG-140)", "--operator", "alice", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	require.Contains(t, minAge(), `"min_age_seconds":2592000`)

	code, out, errOut := clitest.Run(t, bob, "", "change", "approve", "1", "--operator", "bob")
	assert.Equal(t, cmdutil.ExitUsage, code, out)
	assert.Contains(t, errOut, "idemctl: change approve applies the change: pass --yes (-y) when there is no terminal to confirm on\n",
		"one line (then the usage hint every usage error gets)")
	assert.Contains(t, minAge(), `"min_age_seconds":2592000`, "nothing applied")

	code, out, errOut = clitest.RunTTY(t, bob, "n\n", "change", "approve", "1", "--operator", "bob")
	assert.Equal(t, cmdutil.ExitFailure, code, out)
	assert.Contains(t, errOut, "change 1: class_min_age proj.view (planned)")
	assert.Contains(t, errOut, "reason:   rebuilt daily now (CHG-140)")
	assert.Contains(t, errOut, "Approve change 1 (retention horizon, min age 30d -> retention horizon, min age 1d)")
	assert.Contains(t, errOut, "planned by alice (idemctl_test_operator), and apply it now? [y/N]")
	assert.Contains(t, errOut, "nothing done")
	assert.Contains(t, minAge(), `"min_age_seconds":2592000`, "declined: nothing applied")

	code, out, errOut = clitest.RunTTY(t, bob, "y\n", "change", "approve", "1", "--operator", "bob")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "change 1: class_min_age proj.view (approved)")
	assert.Contains(t, minAge(), `"min_age_seconds":86400`, "approved on the terminal: applied")
}
