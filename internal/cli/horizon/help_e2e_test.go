package horizon_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// exitSection is the "Exit codes:" part of a command's --help.
func exitSection(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := runQ(t, "", append(args, "--help")...)
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	i := strings.Index(out, "Exit codes:")
	require.GreaterOrEqual(t, i, 0, out)
	return strings.Join(strings.Fields(out[i:]), " ")
}

// Each horizon command's exit codes say what can happen with that command:
// check has no --contract and approves nothing, and only purge can be an
// interrupted purge.
func TestHorizonExitCodeHelpIsEachCommandsOwn(t *testing.T) {
	t.Parallel()
	check := exitSection(t, "horizon", "check")
	assert.Contains(t, check, "horizon not proven")
	for _, wrong := range []string{"--contract", "planner's person", "interrupted purge", "re-probe", "not in a state"} {
		assert.NotContains(t, check, wrong, "horizon check --help")
	}
	list := exitSection(t, "horizon", "source", "list")
	assert.NotContains(t, list, "interrupted purge", "horizon source list --help")
	assert.NotContains(t, list, "here:", "source list has no code of its own to explain")
	purge := exitSection(t, "horizon", "purge")
	assert.Contains(t, purge, "interrupted purge (run it again to resume)")
	assert.Contains(t, purge, "an import entered its range")
	assert.NotContains(t, purge, "--contract")
	plan := exitSection(t, "horizon", "plan")
	assert.Contains(t, plan, "without --contract")
	assert.NotContains(t, plan, "interrupted purge")
	approve := exitSection(t, "horizon", "approve")
	assert.Contains(t, approve, "planner's person")
	assert.NotContains(t, approve, "horizon not proven")
	remove := exitSection(t, "horizon", "source", "remove")
	assert.Contains(t, remove, "built-in source manual")
}

// The built-in source manual is listed but cannot be removed: a usage error
// that says so (not "not found"), and nothing is planned.
func TestHorizonSourceRemoveManualIsAUsageError(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	code, out, _ := runQ(t, dsn, "horizon", "source", "list", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, `"name":"manual"`)

	code, out, errOut := runQ(t, dsn, "horizon", "source", "remove", "manual", "--reason", "x", "--operator", "alice")
	assert.Equal(t, cmdutil.ExitUsage, code, errOut)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "source manual is built in and cannot be removed")
	assert.Contains(t, errOut, "idemctl corrections done")
	assert.NotContains(t, errOut, "not found")
	assert.Zero(t, rsvCount(t, pool, "SELECT count(*) FROM idem.governed_change"))

	// The database says the same to a caller that is not idemctl.
	_, err := pool.Exec(t.Context(), "SELECT idem.horizon_source_remove('manual', 'alice', 'x')")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "built in")
	assert.Contains(t, err.Error(), "IX308")
	assert.Zero(t, rsvCount(t, pool, "SELECT count(*) FROM idem.governed_change"))
}

// horizon purge of a plan already done, or aborted, says what the plan is and
// what to do (never "idemctl horizon approve"), before asking anything.
func TestHorizonPurgeOfAFinishedPlanSaysWhatToDo(t *testing.T) {
	t.Parallel()
	_, dsn := dbtest.NewPool(t, 2)
	bob := dbtest.As(dsn, dbtest.Operator2)
	dbtest.RegisterAppClass(t, dsn, "proj.view", "horizon")
	dbtest.Seed(t, dsn, "proj.view", "t1", "op-", 3, 10*24*time.Hour, time.Hour)
	plan := func() string {
		code, out, errOut := runQ(t, dsn, "horizon", "plan", "--class", "proj.view", "--before", "5d", "--accept-unbounded-horizon",
			"-o", "json", "--operator", "alice")
		require.Equal(t, cmdutil.ExitOK, code, errOut)
		var p horizon.Plan
		require.NoError(t, json.Unmarshal([]byte(out), &p))
		return fmt.Sprint(p.ID)
	}
	done := plan()
	code, _, errOut := runQ(t, bob, "horizon", "approve", done, "--yes", "--operator", "bob")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, _, errOut = runQ(t, dsn, "horizon", "purge", done, "--yes", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)

	code, out, errOut := runTTY(t, dsn, "y\n", "horizon", "purge", done, "--operator", "alice")
	assert.Equal(t, cmdutil.ExitInvalid, code)
	assert.NotContains(t, out+errOut, "horizon approve")
	assert.NotContains(t, out+errOut, "Purge ", "no confirmation asked for a purge that cannot run")
	assert.Contains(t, errOut, "plan "+done+" is done (3 rows purged): nothing is left to purge")

	aborted := plan()
	code, _, errOut = runQ(t, dsn, "horizon", "cancel", aborted, "--reason", "wrong cutoff", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, _, errOut = runQ(t, dsn, "horizon", "purge", aborted, "--yes", "--operator", "alice")
	assert.Equal(t, cmdutil.ExitInvalid, code)
	assert.NotContains(t, errOut, "horizon approve")
	assert.Contains(t, errOut, "was aborted (wrong cutoff)")
	assert.Contains(t, errOut, "make a new plan: idemctl horizon plan --class proj.view")

	planned := plan()
	code, _, errOut = runQ(t, dsn, "horizon", "purge", planned, "--yes", "--operator", "alice")
	assert.Equal(t, cmdutil.ExitInvalid, code)
	assert.Contains(t, errOut, "idemctl horizon approve "+planned)
}
