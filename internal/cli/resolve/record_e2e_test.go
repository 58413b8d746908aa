package resolve_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// A run records its start before it reads anything and its finish after,
// both naming the input by path and SHA-256 (stdin is read to its end
// before the run).
func TestResolveRecordsStartAndFinishWithInputDigest(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	file := rsvFile(t, rsvLine("acme", "rec-1", 1), rsvLine("acme", "rec-2", 2))
	body, err := os.ReadFile(file)
	require.NoError(t, err)
	sum := sha256.Sum256(body)
	want := hex.EncodeToString(sum[:])

	code, _, errOut := run(t, dsn, "", "resolve", "--file", file, "--operator", "ada")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, _, errOut = run(t, dsn, string(body), "resolve", "--file", "-", "--operator", "ada")
	require.Equal(t, cmdutil.ExitOK, code, errOut)

	rows, err := pool.Query(context.Background(), `SELECT action, target, details::text FROM idem.audit
		WHERE action IN ('resolve.start', 'resolve.run') ORDER BY id`)
	require.NoError(t, err)
	type rec struct {
		action, target string
		details        map[string]any
	}
	var got []rec
	for rows.Next() {
		var r rec
		var raw string
		require.NoError(t, rows.Scan(&r.action, &r.target, &raw))
		require.NoError(t, json.Unmarshal([]byte(raw), &r.details))
		got = append(got, r)
	}
	require.NoError(t, rows.Err())
	require.Len(t, got, 4)
	assert.Equal(t, []string{"resolve.start", "resolve.run", "resolve.start", "resolve.run"},
		[]string{got[0].action, got[1].action, got[2].action, got[3].action})
	for _, r := range got[:2] {
		assert.Equal(t, "resolve:"+file, r.target)
		assert.Equal(t, want, r.details["input_sha256"], r.action)
	}
	assert.Equal(t, want, got[2].details["input_sha256"], "stdin: read to its end before the run")
	assert.Equal(t, want, got[3].details["input_sha256"], "stdin: read to its end")
	assert.Equal(t, "resolve:stdin", got[3].target)
}

// --report never replaces an existing file unless told to: the refusal is a
// usage error before connecting, the file keeps its content and nothing is
// recorded.
func TestResolveReportIsNotOverwritten(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	report := filepath.Join(t.TempDir(), "report.ndjson")
	require.NoError(t, os.WriteFile(report, []byte("19,950 lines of yesterday's evidence\n"), 0o600))
	file := rsvFile(t, rsvLine("acme", "rep-1", 1))
	audits := rsvCount(t, pool, "SELECT count(*) FROM idem.audit")
	before := rsvCounts(t, pool)

	code, out, errOut := run(t, dsn, "", "resolve", "--file", file, "--report", report)
	assert.Equal(t, cmdutil.ExitUsage, code)
	assert.Empty(t, out)
	assert.Equal(t, 2, strings.Count(errOut, "\n"), "the error and where the help is: %q", errOut)
	assert.Contains(t, errOut, "already exists")
	assert.Contains(t, errOut, "--overwrite")
	assert.Contains(t, errOut, "Run 'idemctl resolve --help' for usage.")
	kept, err := os.ReadFile(report)
	require.NoError(t, err)
	assert.Equal(t, "19,950 lines of yesterday's evidence\n", string(kept))
	assert.Equal(t, audits, rsvCount(t, pool, "SELECT count(*) FROM idem.audit"))
	assert.Equal(t, before, rsvCounts(t, pool))

	code, _, errOut = run(t, dsn, "", "resolve", "--file", file, "--report", report, "--overwrite")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	replaced, err := os.ReadFile(report)
	require.NoError(t, err)
	assert.Len(t, rsvJSON(t, string(replaced)), 1)
}

// A line whose transport holds U+0000 is invalid with its reason, not an
// error with a raw SQLSTATE; nothing is written for it.
func TestResolveNULTransportIsInvalid(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	line := `{"tenant":"acme","operation_id":"nul-1","class":"demo.transfer","payload":{"from":"a","to":"b","amount":1,"currency":"EUR"},"transport":{"topic":"payments","key":"a\u0000b"}}`
	before := rsvCounts(t, pool)
	code, out, errOut := run(t, dsn, "", "resolve", "--file", rsvFile(t, line), "-o", "json")
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	rows := rsvJSON(t, out)
	require.Len(t, rows, 1)
	assert.Equal(t, "invalid", rows[0]["outcome"])
	assert.Contains(t, rows[0]["error"], "U+0000")
	assert.NotContains(t, rows[0]["error"], "22P05")
	assert.Equal(t, before, rsvCounts(t, pool))
}
