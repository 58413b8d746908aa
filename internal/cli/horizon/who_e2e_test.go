package horizon_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// Four eyes are persons: a plan alice planned and bob approved and ran, both
// labelled "root" by --operator, shows each as the person with the login in
// horizon status (table and JSON), the approve prompt and the audit list.
func TestFourEyesShowPersonAndLogin(t *testing.T) {
	t.Parallel()
	_, dsn := dbtest.NewPool(t, 2) // alice's login
	bob := dbtest.As(dsn, dbtest.Operator2)
	alice, bobWho := "alice ("+string(dbtest.Operator)+")", "bob ("+string(dbtest.Operator2)+")"
	dbtest.RegisterAppClass(t, dsn, "proj.view", "horizon")
	dbtest.Seed(t, dsn, "proj.view", "t1", "a-", 5, 10*24*time.Hour, time.Second)

	code, out, errOut := runQ(t, dsn, "horizon", "plan", "--class", "proj.view", "--before", "1d",
		"--accept-unbounded-horizon", "--operator", "root", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	var p horizon.Plan
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	id := strconv.FormatInt(p.ID, 10)

	// The approve prompt names the planner as a person with the login.
	code, out, errOut = runTTY(t, bob, "n\n", "horizon", "approve", id, "--operator", "root")
	assert.Equal(t, cmdutil.ExitFailure, code, "declined")
	assert.Contains(t, errOut, "planned by "+alice+")?")
	assert.Contains(t, out, alice, "the plan shown before the question")

	code, out, errOut = runQ(t, bob, "horizon", "approve", id, "--yes", "--operator", "root", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "approved by "+bobWho+" (planned by "+alice+")")
	code, _, errOut = runQ(t, bob, "horizon", "purge", id, "--yes", "--operator", "root")
	require.Equal(t, cmdutil.ExitOK, code, errOut)

	code, out, _ = runQ(t, dsn, "horizon", "status", id, "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	var st horizon.Plan
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	assert.Equal(t, []string{"alice", string(dbtest.Operator), "bob", string(dbtest.Operator2), "bob", string(dbtest.Operator2)},
		[]string{st.PlannedPerson, st.PlannedDBUser, st.ApprovedPerson, st.ApprovedDBUser, st.RanPerson, st.RanDBUser},
		"who ran the purge stays after it finished")
	assert.Equal(t, "root", st.PlannedBy, "the --operator label, for the record")

	code, out, _ = runQ(t, dsn, "horizon", "status", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "PLANNED BY")
	assert.Contains(t, out, "RAN BY")
	assert.Contains(t, out, alice)
	assert.Contains(t, out, bobWho)
	code, out, _ = runTTY(t, dsn, "", "horizon", "status", id, "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, alice, "whole at 80 columns")
	assert.Contains(t, out, bobWho, "whole at 80 columns")

	code, out, _ = runQ(t, dbtest.As(dsn, dbtest.Auditor), "audit", "list", "--action", "horizon", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "ACTOR")
	assert.Contains(t, out, alice)
	assert.Contains(t, out, bobWho)
	assert.Contains(t, out, "root", "the --operator label has its own column")
}
