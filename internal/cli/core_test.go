package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/migrations"
	"github.com/idemctl/idemctl/recovery"
)

// runnableCommands lists every command a user can run, by its path without
// "idemctl " (CommandKey).
func runnableCommands() map[string]*cobra.Command {
	ios, _, _, _ := cmdutil.Test(false)
	out := map[string]*cobra.Command{}
	for _, c := range cmdutil.RunnableOf(NewCmdRoot(cmdutil.NewFactory(ios))) {
		out[cmdutil.CommandKey(c)] = c
	}
	return out
}

func TestHashCommand(t *testing.T) {
	t.Parallel()
	code, out, _ := run(t, "", `{"b": 2, "a": 1}`, "hash")
	require.Equal(t, cmdutil.ExitOK, code)
	same, out2, _ := run(t, "", "{\"a\":1,\n \"b\":2.0}", "hash")
	require.Equal(t, cmdutil.ExitOK, same)
	assert.Equal(t, out, out2, "key order, whitespace and 2.0 vs 2 hash equal")
	assert.Regexp(t, `^jcs-sha256:[0-9a-f]{64}\n$`, out)

	code, out, _ = run(t, "", `{"b": 2, "a": [1.50, "x"]}`, "hash", "--canonical")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Equal(t, `{"a":[1.5,"x"],"b":2}`, out)

	file := filepath.Join(t.TempDir(), "p.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"amount": 100}`), 0o600))
	code, out, _ = run(t, "", "", "hash", file, "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Regexp(t, `^jcs-sha256:`, got["hash"])

	bad := []struct{ name, stdin, want string }{
		{"malformed", `{"a":`, "payload"},
		{"duplicate key", `{"a":1,"a":2}`, "duplicate"},
		{"lossy number", `{"amount":9007199254740993}`, "9007199254740993"},
		{"too large", `"` + strings.Repeat("x", 100) + `"`, "--max-bytes"},
	}
	for _, tc := range bad {
		args := []string{"hash"}
		if tc.name == "too large" {
			args = append(args, "--max-bytes", "50")
		}
		code, out, errOut := run(t, "", tc.stdin, args...)
		assert.Equal(t, cmdutil.ExitInvalid, code, tc.name)
		assert.Empty(t, out, tc.name)
		assert.Contains(t, errOut, tc.want, tc.name)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
	}
	// A file that cannot be read: exit 1, as for every command (docs/exit-codes.md).
	code, _, errOut := run(t, "", "", "hash", filepath.Join(t.TempDir(), "missing.json"))
	assert.Equal(t, cmdutil.ExitFailure, code)
	assert.Contains(t, errOut, "missing.json")
}

// TestHashCanonicalBytes: into a pipe, --canonical prints exactly the bytes
// the hash is computed over (RFC 8785 keeps U+007F, C1 controls, U+2028 and
// bidirectional controls raw); only a terminal sees them escaped.
func TestHashCanonicalBytes(t *testing.T) {
	t.Parallel()
	payload := "{\"z\": \"del\x7f c1\u0085 ls\u2028 rlo\u202e\", \"a\": \"\U0001F600 \\ud83d\\ude00 \\u007f\"}"
	want := "{\"a\":\"\U0001F600 \U0001F600 \x7f\",\"z\":\"del\x7f c1\u0085 ls\u2028 rlo\u202e\"}"
	file := filepath.Join(t.TempDir(), "p.json")
	require.NoError(t, os.WriteFile(file, []byte(payload), 0o600))

	code, hashOut, _ := run(t, "", "", "hash", file)
	require.Equal(t, cmdutil.ExitOK, code)
	code, canonical, _ := run(t, "", "", "hash", "--canonical", file)
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Equal(t, want, canonical)
	sum := sha256.Sum256([]byte(canonical))
	assert.Equal(t, "jcs-sha256:"+hex.EncodeToString(sum[:])+"\n", hashOut, "sha256 of the printed bytes is the hash")

	code, shown, _ := runTTY(t, "", "", "hash", "--canonical", file)
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Equal(t, "{\"a\":\"\U0001F600 \U0001F600 \\x7f\",\"z\":\"del\\x7f c1\\x85 ls\\u2028 rlo\\u202e\"}\n", shown,
		"a terminal sees the controls escaped")
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"hash", "a", "b"},
		{"hash", "--nope"},
		{"frobnicate"},
		{"inspect", "--tenant", "t"},
		{"inspect", "--tenant", "t\x01", "--op", "x"},
		{"hash", "-o", "yaml"},
		{"demo", "run", "--amount", "0"},
	} {
		code, out, errOut := run(t, "", "", args...)
		assert.Equal(t, cmdutil.ExitUsage, code, "%v: %s", args, errOut)
		assert.Empty(t, out)
		assert.NotEmpty(t, errOut)
	}
}

func TestHelpHasExamplesAndExitCodes(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"hash", "--help"}, {"migrate", "--help"}, {"inspect", "--help"}, {"demo", "run", "--help"}} {
		code, out, _ := run(t, "", "", args...)
		require.Equal(t, cmdutil.ExitOK, code)
		assert.Contains(t, out, "Examples:", args)
		assert.Contains(t, out, "Exit codes:", args)
	}
}

func TestDemoMigrateInspectFlow(t *testing.T) {
	t.Parallel()
	// migrate and demo init create roles and own the schema: a superuser's
	// acts. Everything after them is an operator's.
	super := dbtest.As(dbtest.NewDatabase(t), dbtest.Superuser)
	dsn := dbtest.As(super, dbtest.Operator)

	code, out, _ := run(t, super, "", "migrate", "--status", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, `"state":"applied"`)
	code, _, _ = run(t, super, "", "migrate")
	require.Equal(t, cmdutil.ExitOK, code, "migrating a migrated database is a no-op")
	code, _, _ = run(t, super, "", "demo", "init")
	require.Equal(t, cmdutil.ExitOK, code, "demo init is idempotent")
	code, _, errOut := run(t, dsn, "", "migrate")
	assert.Equal(t, cmdutil.ExitFailure, code, "an operator cannot migrate")
	assert.Contains(t, errOut, "may not act as the owner role")
	code, _, _ = run(t, dsn, "", "demo", "init")
	assert.Equal(t, cmdutil.ExitFailure, code, "an operator cannot install the demo")

	code, out, errOut = run(t, dsn, "", "demo", "run", "--tenant", "acme", "--op", "charge-42", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	var steps []map[string]any
	for _, l := range lines {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		steps = append(steps, m)
	}
	assert.Equal(t, "applied", steps[0]["outcome"])
	assert.Equal(t, "already_applied", steps[1]["outcome"])
	assert.Equal(t, steps[0]["response"], steps[1]["response"])
	assert.Equal(t, "conflict", steps[2]["outcome"])
	assert.NotNil(t, steps[2]["quarantine_id"])
	for _, s := range steps {
		assert.EqualValues(t, 1, s["postings"], "one posting at every step")
	}

	code, out, _ = run(t, dsn, "", "inspect", "--tenant", "acme", "--op", "charge-42", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	var rec recovery.InboxRecord
	require.NoError(t, json.Unmarshal([]byte(out), &rec))
	assert.Equal(t, "demo.transfer", rec.Class)
	assert.Regexp(t, `^jcs-sha256:`, rec.Hash)
	assert.JSONEq(t, `{"from":"alice","to":"bob","amount":1250,"currency":"EUR"}`, string(rec.Payload))
	assert.Len(t, rec.Conflicts, 1)

	code, out, _ = run(t, dsn, "", "inspect", "--tenant", "acme", "--op", "charge-42", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "demo.transfer")

	code, _, errOut = run(t, dsn, "", "inspect", "--tenant", "acme", "--op", "nope")
	assert.Equal(t, cmdutil.ExitNotFound, code)
	assert.Contains(t, errOut, "neither an inbox record nor a tombstone")
}

func TestUnreachableDatabase(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(t, "postgres://app:hunter2@127.0.0.1:1/x?connect_timeout=2", "", "inspect", "--tenant", "a", "--op", "b")
	assert.Equal(t, cmdutil.ExitFailure, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "idemctl: connection refused at 127.0.0.1:1 (DSN from --dsn")
	assert.NotContains(t, errOut, "hunter2")
}

// migrate run with roles that are not the schema's (another --role-prefix)
// names the role that owns it and the prefix that matches, creates none of
// the roles it named, and its JSON gives the schema's actual version, as
// superuser and as an operator (it said schema_version 0, and told the
// operator it may not act as the owner role it had named itself).
func TestMigrateWithOtherRolesNamesTheOwner(t *testing.T) {
	t.Parallel()
	super := dbtest.As(dbtest.NewDatabase(t), dbtest.Superuser)
	for _, dsn := range []string{super, dbtest.As(super, dbtest.Operator)} {
		code, out, errOut := run(t, dsn, "", "migrate", "--role-prefix", "idemctl_t_other", "-o", "json")
		assert.Equal(t, cmdutil.ExitFailure, code, errOut)
		assert.Contains(t, errOut, "owned by idem_owner, not idemctl_t_other_owner")
		assert.Contains(t, errOut, "--role-prefix idem")
		assert.NotContains(t, errOut, "may not act as the owner role idemctl_t_other_owner")
		var rep map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
		assert.EqualValues(t, migrations.SchemaVersion(), rep["schema_version"], out)
		assert.NotEqualValues(t, 0, rep["code_version"], out)
	}
	var n int
	require.NoError(t, dbtest.PoolAs(t, super, dbtest.Superuser, 1).QueryRow(t.Context(),
		"SELECT count(*) FROM pg_roles WHERE rolname LIKE 'idemctl\\_t\\_other\\_%'").Scan(&n))
	assert.Zero(t, n, "no role created for a schema that is not theirs")
	// The operator with the schema's own roles: the owner role it names is
	// the schema's.
	code, out, errOut := run(t, dbtest.As(super, dbtest.Operator), "", "migrate", "-o", "json")
	assert.Equal(t, cmdutil.ExitFailure, code, errOut)
	assert.Contains(t, errOut, "may not act as the owner role idem_owner")
	assert.Contains(t, out, fmt.Sprintf(`"schema_version":%d`, migrations.SchemaVersion()))
}
