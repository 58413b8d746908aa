package record_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/clitest"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// record plan's sample on an 80-column terminal: every operation id and
// tenant the operator may have to type stays whole on one line, so does the
// file's digest they compare, and no line passes 80 columns.
func TestRecordPlanSampleKeepsIDsWhole(t *testing.T) {
	t.Parallel()
	_, dsn := dbtest.NewPool(t, 2)
	var lines []string
	var ids []string
	for i := range 3 {
		tenant := fmt.Sprintf("merchant-eu-west-%02d", i)
		op := fmt.Sprintf("psp-settlement-2026-11-30-batch-0042-item-%04d", i)
		ids = append(ids, tenant, op)
		lines = append(lines, fmt.Sprintf(`{"tenant_id":%q,"operation_id":%q,"class":"demo.transfer","payload":{"to":"bob","from":"alice","amount":900,"currency":"EUR"},"response":{"status":"charged"},"evidence":"psp ch_9 settled in the processor's report"}`, tenant, op))
	}
	file := filepath.Join(t.TempDir(), "charges.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	code, out, errOut := clitest.RunTTY(t, dsn, "", "record", "plan", "--file", file, "--reason", "INC-9",
		"--correction", "LC-12 by finance", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	require.Contains(t, out, "sample")
	sample := out[strings.Index(out, "sample"):]
	for _, id := range ids {
		assert.Contains(t, sample, id, "%s whole in the sample:\n%s", id, sample)
	}
	for _, l := range strings.Split(out, "\n") {
		assert.LessOrEqual(t, ansi.StringWidth(l), 80, "%q", l)
	}
	assert.Regexp(t, `(?m)^\s*sha256:[0-9a-f]{64}$`, out, "the digest whole on a line")
}

// A record plan's file with resolve's field name "tenant" (or any field it
// does not know) is refused with its line number, nothing planned, exit 5
// as resolve answers such a line invalid; it failed with a SQL error and
// no line, and unknown fields were ignored.
func TestRecordPlanRefusesUnknownFieldsWithTheLine(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	good := `{"tenant_id":"t1","operation_id":"op-1","class":"demo.transfer","payload":{"to":"bob","from":"alice","amount":900,"currency":"EUR"},"response":{},"evidence":"psp"}`
	for _, bad := range []string{
		`{"tenant":"t1","operation_id":"op-2","class":"demo.transfer","payload":{"amount":1},"response":{},"evidence":"psp"}`,
		`{"tenant_id":"t1","operation_id":"op-2","class":"demo.transfer","payload":{"amount":1},"response":{},"evidence":"psp","reference":"x"}`,
	} {
		file := filepath.Join(t.TempDir(), "charges.ndjson")
		require.NoError(t, os.WriteFile(file, []byte(good+"\n\n"+bad+"\n"), 0o644))
		code, _, errOut := clitest.Run(t, dsn, "", "record", "plan", "--file", file, "--reason", "INC-9", "--operator", "alice")
		assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
		assert.Contains(t, errOut, "line 3: unknown field")
		assert.Contains(t, errOut, "want tenant_id, operation_id")
		assert.NotContains(t, errOut, "SQLSTATE")
	}
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM idem.entry_plan").Scan(&n))
	assert.Zero(t, n, "nothing planned")
}
