package cli

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/migrations"
)

// oneLineErr asserts that a refused command printed one line on stderr and
// nothing on stdout.
func oneLineErr(t *testing.T, out, errOut string, args []string) {
	t.Helper()
	assert.Empty(t, out, "%v", args)
	assert.Equal(t, 1, strings.Count(errOut, "\n"), "%v: one line: %q", args, errOut)
}

// Every runnable command has a policy (what it needs of the database, the
// exit codes it adds), and every policy names a command.
func TestEveryCommandHasAPolicy(t *testing.T) {
	t.Parallel()
	cmds := runnableCommands()
	for key := range cmds {
		_, ok := cmdutil.Policies[key]
		assert.True(t, ok, "command %q has no policy in preflight.go", key)
	}
	for key := range cmdutil.Policies {
		_, ok := cmds[key]
		assert.True(t, ok, "policy %q names no command", key)
	}
}

// --help lists only the exit codes a command can return.
func TestHelpListsItsOwnExitCodes(t *testing.T) {
	t.Parallel()
	codesIn := func(help string) []string {
		i := strings.Index(help, "Exit codes:")
		require.GreaterOrEqual(t, i, 0, help)
		return regexp.MustCompile(`(?m)^  (\d)  `).FindAllString(help[i:], -1)
	}
	cases := map[string][]string{
		"hash":              {"0", "1", "2", "5"},
		"version":           {"0", "1", "2"},
		"migrate":           {"0", "1", "2", "4", "8"},
		"quarantine list":   {"0", "1", "2", "7", "8"},
		"quarantine show":   {"0", "1", "2", "7", "8"},
		"quarantine reject": {"0", "1", "2", "4", "5", "7", "8"},
		"resolve":           {"0", "1", "2", "3", "4", "5", "6", "8"},
		"audit verify":      {"0", "1", "2", "5", "8"},
		"":                  {"0", "1", "2", "3", "4", "5", "6", "7", "8"},
	}
	for cmd, want := range cases {
		args := append(strings.Fields(cmd), "--help")
		code, out, _ := run(t, "", "", args...)
		require.Equal(t, cmdutil.ExitOK, code, cmd)
		var got []string
		for _, c := range codesIn(out) {
			got = append(got, strings.TrimSpace(c))
		}
		assert.Equal(t, want, got, "idemctl %s --help", cmd)
	}
}

// With no DSN anywhere, idemctl refuses instead of trying libpq's default.
func TestNoDSNIsAnError(t *testing.T) {
	for _, env := range []string{"IDEMCTL_DSN", "DATABASE_URL", "PGSERVICE", "PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER"} {
		t.Setenv(env, "")
	}
	for _, args := range [][]string{{"quarantine", "list"}, {"migrate", "--status"}, {"inspect", "--tenant", "a", "--op", "b"}} {
		code, out, errOut := run(t, "", "", args...)
		assert.Equal(t, cmdutil.ExitUsage, code, "%v: %s", args, errOut)
		assert.Contains(t, errOut, "no database named: pass --dsn, or set IDEMCTL_DSN")
		assert.Empty(t, out)
	}
	// A libpq variable is a choice: it is used.
	t.Setenv("PGPORT", "1")
	t.Setenv("PGHOST", "127.0.0.1")
	t.Setenv("PGCONNECT_TIMEOUT", "2")
	code, _, errOut := run(t, "", "", "quarantine", "list")
	assert.Equal(t, cmdutil.ExitFailure, code, errOut)
	assert.Contains(t, errOut, "connection refused at 127.0.0.1:1 (DSN from PGHOST")
}

// A database without schema idem: every command says which database it
// reached and what to run, in one line, with exit 8; nothing is printed as
// if the queue were empty.
func TestWrongDatabaseSaysSo(t *testing.T) {
	t.Parallel()
	super := dbtest.NewDatabase(t)
	dbtest.Admin(t, super, "DROP SCHEMA idem CASCADE")
	dsn := dbtest.As(super, dbtest.Operator)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	where := fmt.Sprintf("%s@%s/%s", dbtest.Operator, u.Host, strings.TrimPrefix(u.Path, "/"))
	for _, args := range [][]string{
		{"quarantine", "list"},
		{"quarantine", "show", "1"},
		{"quarantine", "reject", "1", "--reason", "x", "--yes"},
		{"audit", "list"},
		{"audit", "verify"},
		{"inspect", "--tenant", "a", "--op", "b"},
		{"horizon", "status"},
		{"horizon", "plan", "--class", "demo.transfer", "--before", "1h", "--contract", "C"},
		{"resolve", "--tenant", "a", "--op", "b", "--class", "demo.transfer", "--payload", `{"amount":1}`},
		{"class", "list"},
	} {
		code, out, errOut := run(t, dsn, "", args...)
		assert.Equal(t, cmdutil.ExitSchema, code, "%v: %s", args, errOut)
		oneLineErr(t, out, errOut, args)
		assert.Contains(t, errOut, where, args)
		assert.Contains(t, errOut, "schema idem is missing", args)
		assert.Contains(t, errOut, "run idemctl migrate", args)
		assert.NotContains(t, errOut, dbtest.TestPassword, args)
		assert.NotContains(t, errOut, "42P01", args)
	}
}

// A schema older or newer than the binary is named, with what to run; a
// newer one is never used, and migrate refuses to touch it.
func TestSchemaVersionMismatch(t *testing.T) {
	t.Parallel()
	want := migrations.SchemaVersion()

	older := dbtest.NewDatabase(t)
	dbtest.Admin(t, older, fmt.Sprintf("DELETE FROM idem.schema_migrations WHERE version = %d", want))
	code, out, errOut := run(t, dbtest.As(older, dbtest.Operator), "", "quarantine", "list")
	assert.Equal(t, cmdutil.ExitSchema, code, errOut)
	oneLineErr(t, out, errOut, nil)
	assert.Contains(t, errOut, "schema idem is older than this idemctl")
	assert.Contains(t, errOut, "run idemctl migrate")

	newer := dbtest.NewDatabase(t)
	dbtest.Admin(t, newer, fmt.Sprintf("INSERT INTO idem.schema_migrations (version, name, checksum) VALUES (%d, 'future', 'abc')", want+1))
	for _, args := range [][]string{{"quarantine", "list"}, {"resolve", "--tenant", "a", "--op", "b", "--class", "demo.transfer", "--payload", `{"amount":1}`}} {
		code, out, errOut = run(t, dbtest.As(newer, dbtest.Operator), "", args...)
		assert.Equal(t, cmdutil.ExitSchema, code, errOut)
		oneLineErr(t, out, errOut, args)
		assert.Contains(t, errOut, "schema idem is newer than this idemctl")
		assert.Contains(t, errOut, fmt.Sprintf("schema %03d", want+1))
	}
	code, _, errOut = run(t, newer, "", "migrate")
	assert.Equal(t, cmdutil.ExitSchema, code, errOut)
	assert.Contains(t, errOut, "newer than this binary")

	// A checksum stored shorter than a SHA-256 (another tool wrote the
	// history): a drift, named, not a panic.
	short := dbtest.NewDatabase(t)
	dbtest.Admin(t, short, "UPDATE idem.schema_migrations SET checksum = 'abc' WHERE version = 1")
	code, _, errOut = run(t, short, "", "migrate")
	assert.Equal(t, cmdutil.ExitSchema, code, errOut)
	assert.Contains(t, errOut, "recorded abc")
}

// Every command that writes refuses a read-only session up front: exit 4,
// the same one line, nothing written.
func TestWritersRefuseAReadOnlySession(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	q := fx.Conflict(t, "acme", "ro-1", 1, 2)
	ro := readOnly(t, fx.DSN)
	roSuper := readOnly(t, dbtest.As(fx.DSN, dbtest.Superuser))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "none.ndjson"), []byte(`{"tenant_id":"t","operation_id":"o","class":"demo.transfer","payload":{"amount":1},"response":{},"evidence":"e"}`+"\n"), 0o644))
	args := map[string][]string{
		"demo init":                {"demo", "init"},
		"demo run":                 {"demo", "run"},
		"demo serve":               {"demo", "serve", "--listen", "127.0.0.1:0"},
		"resolve":                  {"resolve", "--tenant", "a", "--op", "b", "--class", "demo.transfer", "--payload", `{"amount":1}`},
		"quarantine reject":        {"quarantine", "reject", fmt.Sprint(q), "--reason", "x", "--yes"},
		"quarantine accept-as-new": {"quarantine", "accept-as-new", fmt.Sprint(q), "--new-operation-id", "n", "--reason", "x", "--yes"},
		"quarantine bulk approve":  {"quarantine", "bulk", "approve", "1", "--yes"},
		"quarantine bulk run":      {"quarantine", "bulk", "run", "1", "--yes"},
		"quarantine bulk abort":    {"quarantine", "bulk", "abort", "1", "--reason", "x"},
		"horizon source add":       {"horizon", "source", "add", "arch", "--kind", "archive", "--dir", dir},
		"horizon source remove":    {"horizon", "source", "remove", "arch", "--reason", "x"},
		"change approve":           {"change", "approve", "1", "--yes"},
		"change abort":             {"change", "abort", "1", "--reason", "x"},
		"record plan":              {"record", "plan", "--file", filepath.Join(dir, "none.ndjson"), "--reason", "x"},
		"record approve":           {"record", "approve", "1", "--yes"},
		"record run":               {"record", "run", "1"},
		"record abort":             {"record", "abort", "1", "--reason", "x"},
		"import plan": {"import", "plan", "--class", "demo.transfer", "--from-ndjson", filepath.Join(dir, "none.ndjson"),
			"--ambiguous", filepath.Join(dir, "ambiguous.ndjson"), "--reason", "x"},
		"import approve":   {"import", "approve", "1", "--yes", "--from-ndjson", filepath.Join(dir, "none.ndjson")},
		"import run":       {"import", "run", "1", "--from-ndjson", filepath.Join(dir, "none.ndjson")},
		"import abort":     {"import", "abort", "1", "--reason", "x"},
		"horizon plan":     {"horizon", "plan", "--class", "demo.transfer", "--before", "1h", "--contract", "C"},
		"horizon approve":  {"horizon", "approve", "1", "--yes"},
		"horizon cancel":   {"horizon", "cancel", "1", "--reason", "x"},
		"horizon purge":    {"horizon", "purge", "1", "--yes"},
		"horizon maintain": {"horizon", "maintain"},
		"class set":        {"class", "set", "demo.transfer", "--retention", "forever"},
		"corrections add":  {"corrections", "add", "--tenant", "a", "--op", "b", "--reason", "x"},
		"corrections done": {"corrections", "done", "1"},
		"person add":       {"person", "add", "zed", "--login", "zed"},
		"person remove":    {"person", "remove", "--login", "zed"},
		"redrive allow":    {"redrive", "allow", "example.com"},
		"redrive disallow": {"redrive", "disallow", "example.com"},
	}
	audit := fx.Count(t, "SELECT count(*) FROM idem.audit")
	for key, p := range cmdutil.Policies {
		if p.Need != cmdutil.NeedWrite {
			continue
		}
		a, ok := args[key]
		if !assert.True(t, ok, "no read-only case for the writer %q", key) {
			continue
		}
		dsn := ro
		if key == "demo init" || strings.HasPrefix(key, "person ") || strings.HasPrefix(key, "redrive ") {
			dsn = roSuper
		}
		code, out, errOut := run(t, dsn, "", a...)
		assert.Equal(t, cmdutil.ExitNotPrimary, code, "%s: %s", key, errOut)
		oneLineErr(t, out, errOut, a)
		assert.Contains(t, errOut, "refused: the session is read-only", key)
		assert.Contains(t, errOut, "target_session_attrs=read-write", key)
	}
	assert.Equal(t, audit, fx.Count(t, "SELECT count(*) FROM idem.audit"), "nothing written")
	assert.Equal(t, 1, fx.Count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'open'"))

	// Readers still read.
	code, _, errOut := run(t, ro, "", "quarantine", "list", "-o", "json")
	assert.Equal(t, cmdutil.ExitOK, code, errOut)
}

// On a terminal, a command names the database it reached, with the libpq
// service it came through.
func TestHeaderNamesTheDatabaseAndService(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	u, err := url.Parse(fx.DSN)
	require.NoError(t, err)
	pw, _ := u.User.Password()
	services := filepath.Join(t.TempDir(), "pg_service.conf")
	require.NoError(t, os.WriteFile(services, []byte(fmt.Sprintf("[oncall-test]\nhost=%s\nport=%s\ndbname=%s\nuser=%s\npassword=%s\nsslmode=disable\n",
		u.Hostname(), u.Port(), strings.TrimPrefix(u.Path, "/"), u.User.Username(), pw)), 0o600))

	code, out, errOut := runTTY(t, "service=oncall-test servicefile="+services, "", "quarantine", "list", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.NotContains(t, out, "db ")
	// The header, its continuation lines (wrapped at the terminal's width,
	// indented two) joined again.
	lines := strings.Split(errOut, "\n")
	line := lines[0]
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "  ") {
			break
		}
		line += " " + strings.TrimSpace(l)
	}
	assert.Equal(t, fmt.Sprintf("db %s@%s/%s (service oncall-test), primary, schema %03d", u.User.Username(), u.Host,
		strings.TrimPrefix(u.Path, "/"), migrations.SchemaVersion()), line)
	assert.NotContains(t, errOut, pw)
}

// A file named on the command line that cannot be read or written is an I/O
// error, exit 1, whichever command or flag names it (they gave 1, 2 and 5);
// a bad --operator is a usage error naming the flag, for every command
// (resolve exited 1 blaming "actor", reject and horizon plan 5); quarantine
// list --group of no open group exits 7, which its help lists.
func TestExitCodesAgreeAcrossCommands(t *testing.T) {
	t.Parallel()
	dsn := dbtest.As(dbtest.NewDatabase(t), dbtest.Operator)
	missing := filepath.Join(t.TempDir(), "nope", "x.ndjson")
	for _, args := range [][]string{
		{"resolve", "--file", missing},
		{"resolve", "--tenant", "t", "--op", "o", "--class", "demo.transfer", "--payload", "@" + missing},
		{"record", "plan", "--file", missing, "--reason", "r"},
		{"hash", missing},
		{"quarantine", "export", "1", "--file", missing},
		{"reconcile", "--report", missing, "--class", "demo.transfer", "--key", "tenant=t,operation_id=o"},
	} {
		code, _, errOut := run(t, dsn, "", args...)
		assert.Equal(t, cmdutil.ExitFailure, code, "%v: %s", args, errOut)
		assert.Contains(t, errOut, "no such file or directory", args)
	}
	for _, args := range [][]string{
		{"resolve", "--tenant", "t", "--op", "o", "--class", "demo.transfer", "--payload", "{}", "--dry-run"},
		{"quarantine", "reject", "1", "--reason", "r", "--yes"},
		{"horizon", "plan", "--class", "demo.transfer", "--before", "1h", "--contract", "C-1", "--accept-unbounded-horizon"},
	} {
		code, _, errOut := run(t, dsn, "", append(args, "--operator", "bad\x1b")...)
		assert.Equal(t, cmdutil.ExitUsage, code, "%v: %s", args, errOut)
		assert.Contains(t, errOut, "--operator contains a control character", args)
		assert.NotContains(t, errOut, "actor", args)
	}
	code, _, errOut := run(t, dsn, "", "quarantine", "list", "--group", "g-000000000000")
	assert.Equal(t, cmdutil.ExitNotFound, code, errOut)
	_, help, _ := run(t, "", "", "quarantine", "list", "--help")
	assert.Regexp(t, `(?m)^  7  `, help)
}
