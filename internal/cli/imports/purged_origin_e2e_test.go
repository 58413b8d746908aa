package imports_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// An imported identity whose body a purge removed keeps its origin:
// idem.identity.entry_plan still names the plan, so `inspect` of the
// tombstone says "imported under entry plan N" (an identity that entered
// without its effect says so, and names its plan), and `inspect --history`
// calls it imported, by the plan's kind, not by the body's transport
// (entered_by), which the purge removed with the body.
func TestPurgedImportKeepsItsOrigin(t *testing.T) {
	t.Parallel()
	_, dsn := dbtest.NewPool(t, 2)
	bob := dbtest.As(dsn, dbtest.Operator2)
	dir := t.TempDir()
	at := time.Now().Add(-60 * 24 * time.Hour).UTC().Format(time.RFC3339Nano)
	store := filepath.Join(dir, "store.ndjson")
	require.NoError(t, os.WriteFile(store, []byte(fmt.Sprintf(
		`{"tenant_id":"7","operation_id":"old-1","payload":{"from":"alice","to":"bob","amount":5,"currency":"EUR"},"response":{"id":"ch_1"},"created_at":%q,"status":"finished"}`+"\n", at)), 0o600))

	code, _, errOut := runQ(t, dsn, "import", "plan", "--class", "demo.transfer", "--from-ndjson", store, "--correction", ledger,
		"--ambiguous", filepath.Join(dir, "ambiguous.ndjson"),
		"--reason", "MIG-1", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	m := regexp.MustCompile(`idemctl import approve (\d+)`).FindStringSubmatch(errOut)
	require.Len(t, m, 2, errOut)
	id := m[1]
	code, _, errOut = run(t, bob, "", "import", "approve", id, "--from-ndjson", store, "--operator", "bob", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, _, errOut = runQ(t, dsn, "import", "run", id, "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, out, errOut := runQ(t, dsn, "inspect", "--tenant", "7", "--op", "old-1", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	require.Contains(t, out, "imported under entry plan "+id, "before the purge")

	// The purge of the class's old bodies: alice plans, bob approves, alice runs.
	code, out, errOut = runQ(t, dsn, "horizon", "plan", "--class", "demo.transfer", "--before", "30d", "--contract", "LEGAL-1",
		"--accept-unbounded-horizon", "--operator", "alice", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	purge := jsonLines(t, out)[0]["id"]
	code, _, errOut = run(t, bob, "", "horizon", "approve", fmt.Sprint(purge), "--operator", "bob", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, _, errOut = runQ(t, dsn, "horizon", "purge", fmt.Sprint(purge), "--operator", "alice", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)

	code, out, errOut = runQ(t, dsn, "inspect", "--tenant", "7", "--op", "old-1", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	require.Contains(t, out, `"purged":true`, "the body is purged")
	assert.Contains(t, out, "imported under entry plan "+id, "inspect of the tombstone still says the identity entered without its effect, and names its plan")

	code, out, errOut = runQ(t, dsn, "inspect", "--tenant", "7", "--op", "old-1", "--history", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	first := jsonLines(t, out)[0]
	assert.Equal(t, "imported", first["event"], "the import is not a record made by hand: %s", strings.TrimSpace(out))
}
