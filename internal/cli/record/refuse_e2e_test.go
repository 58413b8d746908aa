package record_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/clitest"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// A record file whose line has no response, or JSON null for one, or that
// holds an identity on two lines, is refused before anything is planned:
// exit 5, one line naming the file's line (both lines for a twice), no plan.
// A null response recorded answered every retry already_applied with
// nothing, and a twice failed with a raw unique violation, exit 1.
func TestRecordPlanRefusesANullResponseAndAnIdentityTwice(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	line := func(op, response string) string {
		l := `{"tenant_id":"t1","operation_id":"` + op + `","class":"demo.transfer","payload":{"to":"bob","from":"alice","amount":900,"currency":"EUR"},"evidence":"psp ch_9"`
		if response != "" {
			l += `,"response":` + response
		}
		return l + "}"
	}
	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"no response", []string{line("ok-1", `{"status":"charged"}`), line("ok-2", "")}, "line 2: response is required, and JSON null is none"},
		{"a null response", []string{line("ok-1", "null")}, "line 1: response is required, and JSON null is none"},
		{"an identity twice", []string{line("ok-1", `{"a":1}`), "", line("ok-2", `{"a":2}`), line("ok-1", `{"a":1}`)}, "line 4: t1/ok-1 is on line 1 too"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "charges.ndjson")
			require.NoError(t, os.WriteFile(file, []byte(strings.Join(c.lines, "\n")+"\n"), 0o644))
			code, out, errOut := runQ(t, dsn, "record", "plan", "--file", file, "--reason", "INC-9", "--correction", "LC-12",
				"--operator", "alice")
			assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
			assert.Contains(t, errOut, c.want)
			assert.Contains(t, errOut, "nothing planned")
			assert.NotContains(t, errOut, "SQLSTATE")
			assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
			assert.Empty(t, out)
		})
	}
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM idem.entry_plan").Scan(&n))
	assert.Zero(t, n, "nothing planned")
}

// An auditor's or a service's login planning, approving or running a
// record or import plan is told in one line which role the command needs,
// exit 5, not a raw "permission denied ... (SQLSTATE 42501)" and exit 1;
// nothing is written, and an import leaves no --ambiguous file.
func TestEntryCommandsNameTheRoleTheyNeed(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	dir := t.TempDir()
	file := filepath.Join(dir, "charges.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(`{"tenant_id":"t1","operation_id":"psp-1","class":"demo.transfer","payload":{"amount":900},"response":{"status":"charged"},"evidence":"psp ch_9"}`+"\n"), 0o644))
	store := filepath.Join(dir, "store.ndjson")
	require.NoError(t, os.WriteFile(store, []byte(`{"tenant_id":"7","operation_id":"a","payload":{"amount":1},"response":{"ok":true},"created_at":"2026-01-02T03:04:05Z","status":"finished"}`+"\n"), 0o600))
	code, _, errOut := runQ(t, dsn, "record", "plan", "--file", file, "--reason", "INC-9", "--correction", "LC-12", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	// Plan 2, an import: its approval and run read the source first.
	code, _, errOut = runQ(t, dsn, "import", "plan", "--class", "demo.transfer", "--correction", "old ledger", "--from-ndjson", store,
		"--ambiguous", filepath.Join(dir, "planned-ambiguous.ndjson"), "--reason", "MIG", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	var before int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM idem.audit").Scan(&before))
	amb := filepath.Join(dir, "ambiguous.ndjson")
	for _, login := range []dbtest.Role{dbtest.Auditor, dbtest.App} {
		for _, args := range [][]string{
			{"record", "plan", "--file", file, "--reason", "INC-9", "--correction", "LC-12"},
			{"record", "approve", "1", "--yes"},
			{"record", "run", "1"},
			{"import", "plan", "--class", "demo.transfer", "--correction", "old ledger", "--from-ndjson", store, "--ambiguous", amb, "--reason", "MIG"},
			{"import", "approve", "2", "--yes", "--from-ndjson", store},
			{"import", "run", "2", "--from-ndjson", store},
		} {
			code, _, errOut := run(t, dbtest.As(dsn, login), "", append(args, "--operator", "someone")...)
			assert.Equal(t, cmdutil.ExitInvalid, code, "%s %v: %s", login, args, errOut)
			assert.Contains(t, errOut, "this login is not an operator", "%s %v", login, args)
			assert.Contains(t, errOut, "needs an operator's login (granted the schema's operator role, idem_operator by default) mapped to a person")
			assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
			assert.NoFileExists(t, amb)
		}
	}
	// On a terminal the approval shows the plan first: a service's login
	// cannot read it, and is told the same.
	code, _, errOut = clitest.RunTTY(t, dbtest.As(dsn, dbtest.App), "y\n", "record", "approve", "1", "--operator", "svc")
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, errOut, "this login is not an operator")
	var after, plans int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM idem.audit").Scan(&after))
	assert.Equal(t, before, after, "nothing audited, nothing done")
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM idem.entry_plan").Scan(&plans))
	assert.Equal(t, 2, plans, "alice's two plans, no other")
}
