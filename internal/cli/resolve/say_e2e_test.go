package resolve_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/recovery"
)

func sayLine(tenant, op, from, to string, amount int, currency string) string {
	return fmt.Sprintf(`{"tenant":%q,"operation_id":%q,"class":"demo.transfer","payload":{"from":%q,"to":%q,"amount":%d,"currency":%q}}`,
		tenant, op, from, to, amount, currency)
}

// A conflict names the values that changed, not the hashes: at most three,
// then "+N more", in the table; every one in the JSON line (pointer, stored,
// incoming). An id holding a control character is escaped, so that it cannot
// break the table.
func TestResolveConflictShowsWhatChanged(t *testing.T) {
	t.Parallel()
	_, dsn := dbtest.NewPool(t, 2)
	dir := t.TempDir()
	first := filepath.Join(dir, "first.ndjson")
	require.NoError(t, os.WriteFile(first, []byte(sayLine("shop", "pay-1", "alice", "bob", 1101, "EUR")+"\n"+
		sayLine("shop", "pay-2", "alice", "bob", 5, "EUR")+"\n"), 0o600))
	code, _, errOut := run(t, dsn, "", "resolve", "--file", first)
	require.Equal(t, cmdutil.ExitOK, code, errOut)

	again := filepath.Join(dir, "again.ndjson")
	require.NoError(t, os.WriteFile(again, []byte(sayLine("shop", "pay-1", "alice", "bob", 2101, "EUR")+"\n"+
		sayLine("shop", "pay-2", "carol", "dave", 6, "USD")+"\n"+
		`{"tenant":"sh\u001bop","operation_id":"x\ty","class":"demo.transfer"}`+"\n"), 0o600))
	code, out, errOut := runTTY(t, dsn, "", "resolve", "--file", again, "-o", "wide")
	require.Equal(t, cmdutil.ExitConflict, code, errOut)
	assert.Contains(t, out, "/amount 1101 -> 2101")
	assert.Contains(t, out, `/amount 5 -> 6, /currency "EUR" -> "USD", /from "alice" -> "carol", +1 more`)
	assert.NotContains(t, out, "jcs-sha256:", "the changes, not the hashes")
	assert.NotContains(t, out, "\x1b")
	assert.NotContains(t, out, "x\ty")
	assert.Contains(t, out, `sh\x1bop`)
	assert.Contains(t, out, `x\ty`)
	var width int
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `sh\x1bop`) {
			width = len([]rune(l))
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "pay-1") {
			assert.Equal(t, width, len([]rune(l)), "the escaped id keeps the columns:\n%s", out)
		}
	}

	code, out, errOut = run(t, dsn, "", "resolve", "--file", again, "-o", "json")
	require.Equal(t, cmdutil.ExitConflict, code, errOut)
	var rec struct {
		Changes []recovery.Change `json:"changes"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.Split(out, "\n")[1]), &rec))
	require.Len(t, rec.Changes, 4)
	assert.Equal(t, "/to", rec.Changes[3].Pointer)
	assert.JSONEq(t, `"bob"`, string(rec.Changes[3].Stored))
	assert.JSONEq(t, `"dave"`, string(rec.Changes[3].Incoming))
}

// The input holds one identity with two payloads: every line of it is a
// conflict naming the other line, nothing is written, exit 3; the dry run
// says the same.
func TestResolveInputWithTwoPayloadsAppliesNeither(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	file := filepath.Join(t.TempDir(), "batch.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(sayLine("shop", "pay-1", "a", "a", 100, "EUR")+"\n"+
		sayLine("shop", "pay-1", "a", "b", 9999, "EUR")+"\n"), 0o600))
	for _, dry := range []bool{true, false} {
		args := []string{"resolve", "--file", file, "-o", "json"}
		if dry {
			args = append(args, "--dry-run")
		}
		code, out, errOut := run(t, dsn, "", args...)
		require.Equal(t, cmdutil.ExitConflict, code, errOut)
		recs := rsvJSON(t, out)
		require.Len(t, recs, 2)
		assert.Equal(t, "conflict", recs[0]["outcome"])
		assert.Equal(t, "conflict", recs[1]["outcome"])
		assert.Contains(t, recs[0]["note"], "another payload at line 2")
		assert.Contains(t, recs[1]["note"], "another payload at line 1")
	}
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT (SELECT count(*) FROM idem.inbox) + (SELECT count(*) FROM demo.posting) + (SELECT count(*) FROM idem.quarantine)").Scan(&n))
	assert.Zero(t, n, "nothing sent")

	// From stdin, the same.
	in, err := os.ReadFile(file)
	require.NoError(t, err)
	code, out, errOut := run(t, dsn, string(in), "resolve", "--file", "-", "-o", "json")
	require.Equal(t, cmdutil.ExitConflict, code, errOut)
	assert.Equal(t, 2, strings.Count(out, `"outcome":"conflict"`))
}

// The summary names the --report file for the rows it does not show, and
// the progress total does not count blank lines.
func TestResolveSummaryAndProgressTotal(t *testing.T) {
	t.Parallel()
	_, dsn := dbtest.NewPool(t, 2)
	dir := t.TempDir()
	var in strings.Builder
	for i := range cmdutil.MaxAttentionRows + 3 {
		fmt.Fprintf(&in, "%s\n\n  \n", sayLine("shop", fmt.Sprint("bad-", i), "a", "a", 1, "EUR")) // each fails
	}
	file := filepath.Join(dir, "batch.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(in.String()), 0o600))
	report := filepath.Join(dir, "report.ndjson")
	code, out, errOut := runTTY(t, dsn, "", "resolve", "--file", file, "--report", report)
	require.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, out, "... and 3 more: every row is in "+report)
	assert.NotContains(t, out, "--report FILE")
	code, out, _ = runTTY(t, dsn, "", "resolve", "--file", file)
	require.Equal(t, cmdutil.ExitInvalid, code)
	assert.Contains(t, out, "use -o json or --report FILE")
}

// A dry run's would_apply is a prediction its effect's own checks decide (a
// USD payload on an EUR account then fails): the table says so, as -o json
// says "conditional": true, and the real run's error shows whole in the
// attention table, however long the ids (it was cut at 160 bytes).
func TestResolveDryRunSaysConditionalAndErrorsShowWhole(t *testing.T) {
	t.Parallel()
	_, dsn := dbtest.NewPool(t, 2)
	long := strings.Repeat("settlement-batch-2024-", 8) + "x"
	eur := filepath.Join(t.TempDir(), "eur.ndjson")
	require.NoError(t, os.WriteFile(eur, []byte(sayLine("shop-with-a-long-tenant-name", "eur-1", "alice", "bob", 100, "EUR")+"\n"), 0o600))
	code, _, errOut := run(t, dsn, "", "resolve", "--file", eur)
	require.Equal(t, cmdutil.ExitOK, code, errOut) // alice's account is in EUR
	file := filepath.Join(t.TempDir(), "batch.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(sayLine("shop-with-a-long-tenant-name", long, "alice", "bob", 100, "USD")+"\n"), 0o600))

	code, out, errOut := run(t, dsn, "", "resolve", "--file", file, "--dry-run", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, `"conditional":true`)
	code, out, errOut = runTTY(t, dsn, "", "resolve", "--file", file, "--dry-run")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, strings.Join(strings.Fields(strings.NewReplacer("│", " ").Replace(out)), " "), "whose own checks decide")
	assert.Contains(t, out, "1 conditional")
	assert.NotContains(t, out, "a real run would apply it")

	code, out, errOut = run(t, dsn, "", "resolve", "--file", file, "-o", "json")
	require.Equal(t, cmdutil.ExitInvalid, code, errOut)
	recs := rsvJSON(t, out)
	require.Len(t, recs, 1)
	msg, _ := recs[0]["error"].(string)
	require.NotEmpty(t, msg)
	code, out, errOut = run(t, dsn, "", "resolve", "--file", file, "-o", "table")
	require.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, out, msg, "the whole error, not cut")
	code, out, errOut = runTTY(t, dsn, "", "resolve", "--file", file)
	require.Equal(t, cmdutil.ExitInvalid, code, errOut)
	flat := strings.Join(strings.Fields(strings.NewReplacer("│", " ").Replace(out)), " ")
	words := strings.Fields(msg)
	assert.Contains(t, flat, words[len(words)-1], "the reason's last word is on the screen:\n%s", out)
	assert.NotContains(t, out, "...")
}

// A dry run compares hashes and reads no saved response: its JSON carries
// "response": null for an already_applied line, so its table and a single
// answer say a real run returns the saved response, not that it was
// returned; the real run's JSON carries it.
func TestResolveDryRunSaysItDoesNotReadTheResponse(t *testing.T) {
	t.Parallel()
	_, dsn := dbtest.NewPool(t, 2)
	file := filepath.Join(t.TempDir(), "once.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(sayLine("shop", "paid-1", "alice", "bob", 100, "EUR")+"\n"), 0o600))
	code, _, errOut := run(t, dsn, "", "resolve", "--file", file)
	require.Equal(t, cmdutil.ExitOK, code, errOut)

	code, out, errOut := run(t, dsn, "", "resolve", "--file", file, "--dry-run", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	recs := rsvJSON(t, out)
	require.Len(t, recs, 1)
	assert.Equal(t, "already_applied", recs[0]["outcome"])
	assert.Nil(t, recs[0]["response"], "a dry run reads no response")
	code, out, errOut = runTTY(t, dsn, "", "resolve", "--file", file, "--dry-run")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	flat := strings.Join(strings.Fields(strings.NewReplacer("│", " ").Replace(out)), " ")
	assert.Contains(t, flat, "a real run returns its saved response (a dry run does not read it)")
	assert.NotContains(t, flat, "saved response returned")
	code, out, errOut = runTTY(t, dsn, "", "resolve", "--tenant", "shop", "--op", "paid-1", "--class", "demo.transfer",
		"--payload", `{"from":"alice","to":"bob","amount":100,"currency":"EUR"}`, "--dry-run")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "- (a dry run does not read it)")
	assert.NotContains(t, out, "saved response returned")

	code, out, errOut = run(t, dsn, "", "resolve", "--file", file, "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	recs = rsvJSON(t, out)
	require.Len(t, recs, 1)
	assert.NotNil(t, recs[0]["response"], "the real run returns the saved response")
}
