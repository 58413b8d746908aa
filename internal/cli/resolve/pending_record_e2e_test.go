package resolve_test

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

// docs/import.md's cutover, step 5: "If the provider shows a charge that
// the old store never finished, record that charge with `idemctl record
// plan` before you resolve it." The record plan is made (here approved by a
// second person too), then resolve runs before the plan does: the outcome
// known from outside enters without its effect (its --correction writes the
// ledger), so resolve must not run the effect as well. Its dry run does not
// predict would_apply, and the real run refuses the identity, naming the
// plan, with nothing applied.
func TestResolveLeavesAnIdentityAPendingRecordHolds(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	bob := dbtest.As(dsn, dbtest.Operator2)
	dir := t.TempDir()
	rec := filepath.Join(dir, "charges.ndjson")
	require.NoError(t, os.WriteFile(rec, []byte(
		`{"tenant_id":"acme","operation_id":"psp-77","class":"demo.transfer","payload":{"from":"alice","to":"bob","amount":777,"currency":"EUR"},"response":{"posting":"by LC-77"},"evidence":"PSP ch_77"}`+"\n"), 0o600))
	code, _, errOut := run(t, dsn, "", "record", "plan", "--file", rec, "--reason", "PSP charged, never recorded (INC-77)",
		"--correction", "ledger correction LC-77", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	id := regexp.MustCompile(`idemctl record approve (\d+)`).FindStringSubmatch(errOut)[1]
	code, _, errOut = run(t, bob, "", "record", "approve", id, "--yes", "--operator", "bob")
	require.Equal(t, cmdutil.ExitOK, code, errOut)

	postings := rsvCount(t, pool, "SELECT count(*) FROM demo.posting")
	file := rsvFile(t, rsvLine("acme", "psp-77", 777))
	code, out, errOut := run(t, dsn, "", "resolve", "--file", file, "--dry-run", "-o", "json")
	assert.Equal(t, cmdutil.ExitInvalid, code, "refused by a rule: %s", errOut)
	assert.NotContains(t, out, `"would_apply"`, "the dry run predicts the effect runs for an identity record plan %s holds", id)

	code, out, errOut = run(t, dsn, "", "resolve", "--file", file, "-o", "json")
	t.Logf("resolve: exit %d %s %s", code, out, errOut)
	assert.Equal(t, cmdutil.ExitInvalid, code, "refused by a rule, nothing written")
	assert.Equal(t, postings, rsvCount(t, pool, "SELECT count(*) FROM demo.posting"),
		"resolve ran the effect of an outcome record plan %s enters without it", id)
	assert.Contains(t, out+errOut, "record plan "+id+" (approved) holds", "the refusal names the plan")
	assert.Contains(t, out+errOut, "idemctl record run "+id, "and what to type next")
}

// The same for an import: an approved import plan keeps its rows in its
// stage (not as items), and its run enters them without their effect.
// resolve of one of them, before the run, must refuse it as well (dry run
// and run), naming the plan, with nothing applied; an identity the stage
// does not hold is resolved as usual.
func TestResolveLeavesAnIdentityAPendingImportStages(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	bob := dbtest.As(dsn, dbtest.Operator2)
	dir := t.TempDir()
	store := filepath.Join(dir, "store.ndjson")
	require.NoError(t, os.WriteFile(store, []byte(
		`{"tenant_id":"acme","operation_id":"old-88","payload":{"from":"alice","to":"bob","amount":888,"currency":"EUR"},"response":{"id":"ch_88"},"created_at":"2026-11-01T10:00:00Z","status":"finished"}`+"\n"), 0o600))
	code, _, errOut := run(t, dsn, "", "import", "plan", "--class", "demo.transfer", "--from-ndjson", store,
		"--correction", "ledger correction LC-88", "--ambiguous", filepath.Join(dir, "amb.ndjson"), "--reason", "MIG-88", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	id := regexp.MustCompile(`idemctl import approve (\d+)`).FindStringSubmatch(errOut)[1]
	code, _, errOut = run(t, bob, "", "import", "approve", id, "--from-ndjson", store, "--operator", "bob", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)

	postings := rsvCount(t, pool, "SELECT count(*) FROM demo.posting")
	file := rsvFile(t, rsvLine("acme", "old-88", 888))
	code, out, errOut := run(t, dsn, "", "resolve", "--file", file, "--dry-run", "-o", "json")
	assert.Equal(t, cmdutil.ExitInvalid, code, "refused by a rule: %s", errOut)
	assert.NotContains(t, out, `"would_apply"`, "the dry run predicts the effect runs for an identity import plan %s stages", id)

	code, out, errOut = run(t, dsn, "", "resolve", "--file", file, "-o", "json")
	assert.Equal(t, cmdutil.ExitInvalid, code, "refused by a rule, nothing written: %s %s", out, errOut)
	assert.Equal(t, postings, rsvCount(t, pool, "SELECT count(*) FROM demo.posting"),
		"resolve ran the effect of an outcome import plan %s enters without it", id)
	assert.Contains(t, out+errOut, "import plan "+id+" (approved) holds", "the refusal names the plan")
	assert.Contains(t, out+errOut, "idemctl import run "+id, "and what to type next")

	other := rsvFile(t, rsvLine("acme", "new-1", 5))
	code, out, errOut = run(t, dsn, "", "resolve", "--file", other, "-o", "json")
	assert.Equal(t, cmdutil.ExitOK, code, "an identity no plan holds: %s %s", out, errOut)
}
