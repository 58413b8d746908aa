package imports_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// Exit codes are defined once and used the same way by every command
// (docs/exit-codes.md): 3 is "at least one conflict (the request was
// quarantined, nothing ran)". `import run` (and `record run`) that
// quarantines a row, because the inbox holds its identity with another
// payload, exits 3, so a runbook that checks the exit code learns that a
// conflict waits in the queue.
func TestImportRunThatQuarantinesExits3(t *testing.T) {
	t.Parallel()
	_, dsn := dbtest.NewPool(t, 2)
	bob := dbtest.As(dsn, dbtest.Operator2)
	dir := t.TempDir()
	// The new service applied demo/k-1 for 500.
	code, _, errOut := runQ(t, dsn, "resolve", "--tenant", "demo", "--op", "k-1", "--class", "demo.transfer",
		"--payload", `{"from":"alice","to":"bob","amount":500,"currency":"EUR"}`, "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	// The old store finished demo/k-1 for 700.
	store := filepath.Join(dir, "store.ndjson")
	require.NoError(t, os.WriteFile(store, []byte(
		`{"tenant_id":"demo","operation_id":"k-1","payload":{"from":"alice","to":"bob","amount":700,"currency":"EUR"},"response":{"id":"ch_1"},"created_at":"2026-11-01T10:00:00Z","status":"finished"}`+"\n"), 0o600))
	code, _, errOut = runQ(t, dsn, "import", "plan", "--class", "demo.transfer", "--from-ndjson", store, "--correction", ledger,
		"--ambiguous", filepath.Join(dir, "amb.ndjson"), "--reason", "MIG-1", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	id := regexp.MustCompile(`idemctl import approve (\d+)`).FindStringSubmatch(errOut)[1]
	code, _, errOut = run(t, bob, "", "import", "approve", id, "--from-ndjson", store, "--operator", "bob", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)

	code, _, errOut = runQ(t, dsn, "import", "run", id, "--operator", "alice")
	require.Contains(t, errOut, "quarantined 1")
	assert.Equal(t, cmdutil.ExitConflict, code, "a run that quarantined a row: %s", errOut)
}

// A run is idempotent: `import run` of a plan that already ran (by this
// person, another, or a run that finished while this one waited for the
// plan's lock) enters nothing, says the plan already ran, shows what that
// run did, and exits as that run did (0, or 3 when it left a conflict),
// not 5 as for a plan that cannot run.
func TestImportRunOfAPlanThatRanSaysSo(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	bob := dbtest.As(dsn, dbtest.Operator2)
	dir := t.TempDir()
	store := filepath.Join(dir, "store.ndjson")
	require.NoError(t, os.WriteFile(store, []byte(
		`{"tenant_id":"demo","operation_id":"k-1","payload":{"from":"alice","to":"bob","amount":700,"currency":"EUR"},"response":{"id":"ch_1"},"created_at":"2026-11-01T10:00:00Z","status":"finished"}`+"\n"+
			`{"tenant_id":"demo","operation_id":"k-2","payload":{"from":"alice","to":"bob","amount":800,"currency":"EUR"},"response":{"id":"ch_2"},"created_at":"2026-11-01T10:01:00Z","status":"finished"}`+"\n"), 0o600))
	code, _, errOut := runQ(t, dsn, "import", "plan", "--class", "demo.transfer", "--from-ndjson", store, "--correction", ledger,
		"--ambiguous", filepath.Join(dir, "amb.ndjson"), "--reason", "MIG-2", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	id := regexp.MustCompile(`idemctl import approve (\d+)`).FindStringSubmatch(errOut)[1]
	code, _, errOut = run(t, bob, "", "import", "approve", id, "--from-ndjson", store, "--operator", "bob", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)

	code, first, errOut := runQ(t, dsn, "import", "run", id, "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.NotContains(t, errOut, "already ran")

	code, again, errOut := runQ(t, dsn, "import", "run", id, "--operator", "alice", "-o", "json")
	assert.Equal(t, cmdutil.ExitOK, code, "a plan that ran, run again: %s", errOut)
	assert.Contains(t, errOut, "plan "+id+" already ran: nothing entered now")
	assert.Contains(t, again, `"entered":2`, "what the first run entered, shown again")
	assert.NotEmpty(t, first)
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM idem.identity WHERE tenant_id = 'demo'").Scan(&n))
	assert.Equal(t, 2, n, "nothing entered twice")
}
