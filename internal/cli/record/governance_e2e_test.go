package record_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// accept-as-new of a money class plans instead of running: nothing runs
// until another person approves.
func TestAcceptAsNewOfAMoneyClassPlans(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	dbtest.SeedConflicts(t, dsn, dbtest.ClientBug{Prefix: "m-", N: 1, Change: "amount", Source: "mobile"})
	var id int64
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT id FROM idem.quarantine").Scan(&id))
	code, _, errOut := runQ(t, dsn, "class", "set", "demo.transfer", "--money", "/amount,/currency,minor", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, out, errOut := runQ(t, dsn, "quarantine", "accept-as-new", fmt.Sprint(id), "--new-operation-id", "m-1-rev2",
		"--reason", "corrected", "--yes", "--operator", "alice", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "money class")
	assert.Contains(t, out, "nothing ran")
	assert.Contains(t, out, "idemctl quarantine bulk approve 1")
	var status string
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT status FROM idem.quarantine WHERE id = $1", id).Scan(&status))
	assert.Equal(t, "open", status)
}

// idemctl record: alice plans from a file, bob approves, it runs; inspect
// and inspect --history say the identity was recorded by hand, by whom and
// under which plan.
func TestRecordByHandCommands(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	bob := dbtest.As(dsn, dbtest.Operator2)
	file := filepath.Join(t.TempDir(), "charges.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(`{"tenant_id":"t1","operation_id":"psp-1","class":"demo.transfer","payload":{"to":"bob","from":"alice","amount":900,"currency":"EUR"},"response":{"status":"charged"},"evidence":"psp ch_9"}`+"\n"), 0o644))
	code, _, errOut := runQ(t, dsn, "record", "plan", "--file", file, "--reason", "INC-9", "--operator", "alice")
	assert.Equal(t, cmdutil.ExitInvalid, code, "a SQL effect needs --correction")
	assert.Contains(t, errOut, "--correction")
	code, out, errOut := runQ(t, dsn, "record", "plan", "--file", file, "--reason", "INC-9", "--correction", "LC-12 by finance",
		"--operator", "alice", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "alice (idemctl_test_operator)")
	m := regexp.MustCompile(`idemctl record approve (\d+)`).FindStringSubmatch(errOut)
	require.Len(t, m, 2, errOut)
	id := m[1]
	code, _, _ = runQ(t, dsn, "record", "approve", id, "--yes", "--operator", "alice")
	assert.Equal(t, cmdutil.ExitInvalid, code, "four eyes")
	// what the approver reviews: the response retries will get back
	code, out, errOut = run(t, bob, "", "record", "show", id, "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, `{"status": "charged"}`, "the approver sees the response retries get")
	code, out, errOut = run(t, bob, "", "record", "show", id, "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, `"response":{"status":"charged"}`)
	code, _, errOut = run(t, bob, "", "record", "approve", id, "--yes", "--operator", "bob")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, _, errOut = runQ(t, dsn, "record", "run", id, "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	// a run of a plan that ran is idempotent: it says so, enters nothing
	code, _, errOut = run(t, bob, "", "record", "run", id, "--operator", "bob")
	assert.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, errOut, "record plan "+id+" already ran: nothing entered now")
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM demo.posting").Scan(&n))
	assert.Zero(t, n, "no effect ran")

	code, out, errOut = runQ(t, dsn, "inspect", "--tenant", "t1", "--op", "psp-1", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "recorded by hand under entry plan "+id+": planned by alice (idemctl_test_operator), approved by bob (idemctl_test_operator2)")
	code, out, errOut = runQ(t, dsn, "inspect", "--tenant", "t1", "--op", "psp-1", "--history", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "recorded by hand")
	assert.Contains(t, out, "record under entry plan "+id)
}

// resolve of an identity recorded by hand answers already_applied and says
// that its effect never ran, naming the plan (JSON: note and entry_plan;
// the table's meaning and a single answer's note), dry run or not.
func TestResolveOfARecordedIdentitySaysItsEffectNeverRan(t *testing.T) {
	t.Parallel()
	_, dsn := dbtest.NewPool(t, 2)
	bob := dbtest.As(dsn, dbtest.Operator2)
	payload := `{"to":"bob","from":"alice","amount":900,"currency":"EUR"}`
	file := filepath.Join(t.TempDir(), "charges.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(`{"tenant_id":"t1","operation_id":"psp-1","class":"demo.transfer","payload":`+payload+`,"response":{"status":"charged"},"evidence":"psp ch_9"}`+"\n"), 0o644))
	code, _, errOut := runQ(t, dsn, "record", "plan", "--file", file, "--reason", "INC-9", "--correction", "LC-12", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	m := regexp.MustCompile(`idemctl record approve (\d+)`).FindStringSubmatch(errOut)
	require.Len(t, m, 2, errOut)
	id := m[1]
	code, _, errOut = run(t, bob, "", "record", "approve", id, "--yes", "--operator", "bob")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, _, errOut = runQ(t, dsn, "record", "run", id, "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)

	batch := filepath.Join(t.TempDir(), "batch.ndjson")
	require.NoError(t, os.WriteFile(batch, []byte(`{"tenant":"t1","operation_id":"psp-1","class":"demo.transfer","payload":`+payload+`}`+"\n"), 0o644))
	for _, dry := range []bool{true, false} {
		args := []string{"resolve", "--file", batch, "-o", "json", "--operator", "alice"}
		if dry {
			args = append(args, "--dry-run")
		}
		code, out, errOut := runQ(t, dsn, args...)
		require.Equal(t, cmdutil.ExitOK, code, errOut)
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &rec), out)
		assert.Equal(t, "already_applied", rec["outcome"])
		assert.Contains(t, rec["note"], "recorded by hand under entry plan "+id+": its effect never ran here", "dry run %v", dry)
		assert.EqualValues(t, mustAtoi(t, id), rec["entry_plan"])
	}
	code, out, errOut := runQ(t, dsn, "resolve", "--file", batch, "-o", "table", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "1 of them entered by an entry plan (recorded by hand or imported): their effect never ran here")
	code, out, errOut = runQ(t, dsn, "resolve", "--tenant", "t1", "--op", "psp-1", "--class", "demo.transfer", "--payload", payload,
		"-o", "table", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "its effect never ran here")
	assert.NotContains(t, out, "was applied before")
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
