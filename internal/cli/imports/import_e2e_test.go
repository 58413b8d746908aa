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

	"github.com/idemctl/idemctl/internal/cli/clitest"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// importStore is a rocket-rides-shaped store (idempotency_keys) in schema
// rides, readable by the replay-source login: 30 keys over ninety days,
// every tenth abandoned at "started", every tenth+1 still locked.
const importStore = `
CREATE SCHEMA rides;
CREATE TABLE rides.idempotency_keys (
    id BIGSERIAL PRIMARY KEY, created_at TIMESTAMPTZ NOT NULL DEFAULT now(), idempotency_key TEXT NOT NULL,
    last_run_at TIMESTAMPTZ NOT NULL DEFAULT now(), locked_at TIMESTAMPTZ DEFAULT now(), request_method TEXT NOT NULL,
    request_params JSONB NOT NULL, request_path TEXT NOT NULL, response_code INT NULL, response_body JSONB NULL,
    recovery_point TEXT NOT NULL, user_id BIGINT NOT NULL);
CREATE UNIQUE INDEX ON rides.idempotency_keys (user_id, idempotency_key);
GRANT USAGE ON SCHEMA rides TO idemctl_test_nobody;
GRANT SELECT ON rides.idempotency_keys TO idemctl_test_nobody;
INSERT INTO rides.idempotency_keys (created_at, idempotency_key, locked_at, request_method, request_params, request_path,
                                    response_code, response_body, recovery_point, user_id)
SELECT now() - interval '90 days' * (1 - g / 31.0), 'key-' || g, CASE WHEN g % 10 = 1 THEN now() END, 'POST',
       jsonb_build_object('from', 'alice', 'to', 'bob', 'amount', 100 + g, 'currency', 'EUR'), '/charges',
       CASE WHEN g % 10 > 1 THEN 201 END, CASE WHEN g % 10 > 1 THEN jsonb_build_object('id', 'ch_' || g) END,
       CASE g % 10 WHEN 0 THEN 'started' WHEN 1 THEN 'ride_created' ELSE 'finished' END, 7
FROM generate_series(1, 30) g;`

// ledger is what an import into demo.transfer (a class with a SQL effect)
// cites: who wrote the effects of the operations it imports.
const ledger = "postings written by rides before the cutover"

const importQuery = `SELECT user_id AS tenant_id, idempotency_key AS operation_id, request_params AS payload,
  CASE WHEN response_code IS NOT NULL THEN jsonb_build_object('code', response_code, 'body', response_body) END AS response,
  created_at, recovery_point AS status, locked_at IS NOT NULL AS locked FROM rides.idempotency_keys`

// idemctl import: alice plans from the store's database, bob approves, it
// runs; idemctl resolve then answers every finished key, sent again with
// its JSON re-serialised, already_applied with no effect run, and takes the
// ambiguous list as it is.
func TestImportCommands(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	bob := dbtest.As(dsn, dbtest.Operator2)
	dbtest.Admin(t, dsn, importStore)
	dir := t.TempDir()
	amb := filepath.Join(dir, "ambiguous.ndjson")
	code, _, errOut := runQ(t, dsn, "class", "set", "demo.transfer", "--money", "/amount,/currency,minor", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	plan := []string{"import", "plan", "--class", "demo.transfer", "--from-postgres", dbtest.SourceDSN(dsn),
		"--password-env", dbtest.SourcePasswordEnv, "--query", importQuery, "--ambiguous", amb, "--reason", "MIG-1", "--operator", "alice"}
	// What a record of the class cites, an import cites too, before it reads
	// anything: nothing planned, no --ambiguous file.
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--correction", ledger}, "moves money: cite the business contract the approver checks the imported amounts against (--contract)"},
		{[]string{"--contract", "PSP-7"}, "has a SQL effect, which an import does not run: name who wrote the imported operations' effects"},
	} {
		code, _, errOut = runQ(t, dsn, append(plan[:len(plan):len(plan)], c.flags...)...)
		assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
		assert.Contains(t, errOut, c.want)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %s", errOut)
		assert.NoFileExists(t, amb)
	}
	plan = append(plan, "--contract", "PSP-7", "--correction", ledger)
	code, _, errOut = runQ(t, dsn, append(plan[:len(plan):len(plan)], "--password-env", "PGPASSWORD")...)
	assert.Equal(t, cmdutil.ExitInvalid, code, "a source's password is read from IDEMCTL_SOURCE_* only")
	assert.Contains(t, errOut, "IDEMCTL_SOURCE_")
	code, out, errOut := runQ(t, dsn, append(plan, "-o", "table")...)
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, errOut, "30 rows read: 24 to import (0 hash-only), 6 ambiguous")
	assert.Contains(t, errOut, "import: 30 rows read: 24 to import, 6 ambiguous, 0 invalid", "the last progress line says what was read")
	assert.Contains(t, out, "alice (idemctl_test_operator)")
	// The 24 finished charges: amounts 102..129 cents less the tenths.
	assert.Contains(t, out, "EUR 27.72 over 24 records", "the approver sees the money per currency")
	assert.Regexp(t, `contract\s+│ PSP-7`, out)
	m := regexp.MustCompile(`idemctl import approve (\d+)`).FindStringSubmatch(errOut)
	require.Len(t, m, 2, errOut)
	id := m[1]
	source := []string{"--from-postgres", dbtest.SourceDSN(dsn), "--password-env", dbtest.SourcePasswordEnv, "--query", importQuery}
	code, _, _ = runQ(t, dsn, append([]string{"import", "approve", id, "--operator", "alice", "--yes"}, source...)...)
	assert.Equal(t, cmdutil.ExitInvalid, code, "four eyes")
	code, _, errOut = run(t, bob, "", "import", "approve", id, "--operator", "bob", "--yes")
	assert.Equal(t, cmdutil.ExitUsage, code, "the approval reads the source again")
	assert.Contains(t, errOut, "the approval reads the plan's source again")
	code, _, errOut = run(t, bob, "", "record", "approve", id, "--operator", "bob", "--yes")
	assert.Equal(t, cmdutil.ExitInvalid, code, "record approves no import")
	assert.Contains(t, errOut, "entry plan "+id+" is an import plan: approve it with idemctl import approve "+id+" and its source")
	// An unreachable source: nothing approved, exit 1, the source named.
	code, _, errOut = run(t, bob, "", "import", "approve", id, "--operator", "bob", "--yes", "--from-postgres",
		"postgres://reader@127.0.0.1:1/store?sslmode=disable&connect_timeout=2", "--query", importQuery)
	assert.Equal(t, cmdutil.ExitFailure, code, errOut)
	assert.Contains(t, errOut, "connection refused at 127.0.0.1:1 (DSN from --from-postgres")
	// bob, on a terminal, sees the money before he answers.
	code, out, errOut = clitest.RunTTY(t, bob, "y\n", append([]string{"import", "approve", id, "--operator", "bob", "-o", "table"}, source...)...)
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, errOut, "enter without their effect, recording EUR 27.72 over 24 records?")
	assert.Regexp(t, `items digest:?\s+(│ )?[0-9a-f]{64}`, out, "the approval shows the stage's digest in hex")
	assert.Contains(t, errOut, "import plan "+id+" approved: the 24 rows its source gives are the plan's")
	code, _, errOut = runQ(t, dsn, "record", "run", id, "--operator", "alice")
	assert.Equal(t, cmdutil.ExitInvalid, code, "record runs no import")
	assert.Contains(t, errOut, "entry plan "+id+" is an import plan: run it with idemctl import run "+id+" (on Citus with its source")
	code, _, errOut = runQ(t, dsn, "import", "run", id, "--operator", "alice", "--from-postgres", dbtest.SourceDSN(dsn))
	assert.Equal(t, cmdutil.ExitUsage, code, "a source given is given whole")
	assert.Contains(t, errOut, "--from-postgres needs --query")
	// The run enters the stage the approval compared with the source: a
	// source given is not read (here one whose password is not set).
	code, out, errOut = runQ(t, dsn, "import", "run", id, "--operator", "alice", "-o", "json", "--password-env", "IDEMCTL_SOURCE_NOT_SET",
		"--from-postgres", dbtest.SourceDSN(dsn), "--query", importQuery)
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, errOut, "import plan "+id+": the source was not read: the run entered the stage its approval compared with the source")
	assert.Contains(t, errOut, "outcomes: entered 24")
	ran := jsonLines(t, out)
	require.Len(t, ran, 1)
	assert.Equal(t, map[string]any{"entered": float64(24)}, ran[0]["outcomes"], "the JSON carries the text's counts")
	assert.Regexp(t, `cursor: \S+/7/key-30 `, errOut)

	// The migrated service's retries, through idemctl resolve.
	var retries strings.Builder
	for g := 1; g <= 30; g++ {
		if g%10 > 1 {
			fmt.Fprintf(&retries, `{"operation_id":"key-%d", "tenant":"7", "class":"demo.transfer", "payload":{ "currency":"EUR", "amount": %d, "to":"bob", "from":"alice" }}`+"\n", g, 100+g)
		}
	}
	file := filepath.Join(dir, "retries.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(retries.String()), 0o600))
	code, out, errOut = runQ(t, dsn, "resolve", "--file", file, "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	lines := jsonLines(t, out)
	require.Len(t, lines, 24)
	for _, l := range lines {
		assert.Equal(t, "already_applied", l["outcome"], l)
		assert.Contains(t, fmt.Sprint(l["response"]), "ch_", l)
	}
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM demo.posting").Scan(&n))
	assert.Zero(t, n, "no effect ran")

	// The ambiguous list is resolve's input as it is.
	code, out, errOut = runQ(t, dsn, "resolve", "--file", amb, "--dry-run", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	lines = jsonLines(t, out)
	require.Len(t, lines, 6)
	for _, l := range lines {
		assert.NotEqual(t, "invalid", l["outcome"], l)
	}
	code, out, errOut = runQ(t, dsn, "inspect", "--tenant", "7", "--op", "key-5", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "imported under entry plan "+id+": planned by alice (idemctl_test_operator), approved by bob (idemctl_test_operator2)")
	// inspect --history names the plan's audit row (its run's), as for a record
	code, out, errOut = runQ(t, dsn, "inspect", "--tenant", "7", "--op", "key-5", "--history", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	var runAudit int64
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT id FROM idem.audit WHERE action = 'entry.run' AND target = 'entry_plan:' || $1", id).Scan(&runAudit))
	assert.Regexp(t, fmt.Sprintf(`"event":"imported".*"audit_id":%d}`, runAudit), out)
}

// A source that holds an identity twice is planned (the approver sees it
// in the counts) with a warning that its run will be refused, and its run
// enters nothing (exit code 5).
func TestImportPlanWarnsOfAnIdentityTwice(t *testing.T) {
	t.Parallel()
	_, dsn := dbtest.NewPool(t, 2)
	bob := dbtest.As(dsn, dbtest.Operator2)
	path := filepath.Join(t.TempDir(), "store.ndjson")
	line := `{"tenant_id":"7","operation_id":%q,"payload":{"amount":1},"response":{"ok":true},"created_at":"2026-01-02T03:04:05Z","status":"finished"}` + "\n"
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(line, "a")+fmt.Sprintf(line, "b")+fmt.Sprintf(line, "a")), 0o600))
	code, _, errOut := runQ(t, dsn, "import", "plan", "--class", "demo.transfer", "--correction", ledger, "--from-ndjson", path, "--reason", "MIG-2",
		"--ambiguous", filepath.Join(t.TempDir(), "ambiguous.ndjson"), "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, errOut, "warning: identities the source holds more than once: 1; its run will be refused")
	m := regexp.MustCompile(`idemctl import approve (\d+)`).FindStringSubmatch(errOut)
	require.Len(t, m, 2, errOut)
	code, _, errOut = run(t, bob, "", "import", "approve", m[1], "--operator", "bob", "--yes", "--from-ndjson", path)
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, _, errOut = runQ(t, dsn, "import", "run", m[1], "--operator", "alice", "--from-ndjson", path)
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, errOut, "the source holds an identity twice")
}

// A plan the approver rejects ends with idemctl import abort: its stage is
// dropped, the audit says so, and a run of it exits 5 naming the plan as
// aborted; nothing enters.
func TestImportAbortDropsTheStage(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	bob := dbtest.As(dsn, dbtest.Operator2)
	path := filepath.Join(t.TempDir(), "store.ndjson")
	line := `{"tenant_id":"7","operation_id":%q,"payload":{"amount":1},"response":{"ok":true},"created_at":"2026-01-02T03:04:05Z","status":"finished"}` + "\n"
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(line, "a")+fmt.Sprintf(line, "b")), 0o600))
	code, _, errOut := runQ(t, dsn, "import", "plan", "--class", "demo.transfer", "--correction", ledger, "--from-ndjson", path, "--reason", "MIG-3",
		"--ambiguous", filepath.Join(t.TempDir(), "ambiguous.ndjson"), "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	m := regexp.MustCompile(`idemctl import approve (\d+)`).FindStringSubmatch(errOut)
	require.Len(t, m, 2, errOut)
	stage := func() bool {
		var there bool
		require.NoError(t, pool.QueryRow(t.Context(), "SELECT to_regclass('idem.import_stage_' || $1) IS NOT NULL", m[1]).Scan(&there))
		return there
	}
	require.True(t, stage())

	code, _, errOut = run(t, bob, "", "import", "abort", m[1], "--operator", "bob")
	assert.Equal(t, cmdutil.ExitUsage, code, errOut)
	assert.Contains(t, errOut, "--reason is required")
	code, _, errOut = run(t, bob, "", "import", "abort", "999", "--operator", "bob", "--reason", "x")
	assert.Equal(t, cmdutil.ExitNotFound, code, errOut)
	require.True(t, stage())

	code, out, errOut := run(t, bob, "", "import", "abort", m[1], "--operator", "bob", "--reason", "wrong store (MIG-3 is the staging copy)", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Regexp(t, `state\s+│ aborted`, out)
	assert.Regexp(t, `aborted\s+│ wrong store \(MIG-3 is the staging copy\)`, out)
	assert.Contains(t, errOut, "import plan "+m[1]+" aborted: nothing entered, its stage is dropped")
	assert.False(t, stage(), "the stage is dropped")
	code, out, errOut = runQ(t, dsn, "audit", "list", "--action", "entry.abort", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, `"stage_dropped":true`)

	code, _, errOut = runQ(t, dsn, "import", "run", m[1], "--operator", "alice", "--from-ndjson", path)
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, errOut, "entry plan "+m[1]+" is aborted")
	code, _, errOut = runQ(t, dsn, "import", "abort", m[1], "--operator", "alice", "--reason", "again")
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM idem.identity").Scan(&n))
	assert.Zero(t, n, "nothing entered")
}

// --since and --since-overlap are passed as they are: importer.Plan alone
// decides where the store is read from (the cursor less the overlap), and
// the plan records it. A store that cannot be read leaves no --ambiguous
// file behind.
func TestImportPlanSinceReadsFromTheOverlap(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	dbtest.Admin(t, dsn, importStore)
	var cursorAt time.Time // four days ago, on the store's clock: key-30 after it, key-29 (5.8 days) 0.8 days before it
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT now() - interval '4 days'").Scan(&cursorAt))
	since := cursorAt.UTC().Format(time.RFC3339Nano) + "/7/key-x"
	dir := t.TempDir()
	plan := func(extra ...string) (int, string, string) {
		args := append([]string{"import", "plan", "--class", "demo.transfer", "--correction", ledger, "--from-postgres", dbtest.SourceDSN(dsn),
			"--password-env", dbtest.SourcePasswordEnv, "--query", importQuery, "--ambiguous", filepath.Join(dir, "amb.ndjson"),
			"--overwrite", "--reason", "cutover", "--operator", "alice", "--since", since, "-o", "json"}, extra...)
		return runQ(t, dsn, args...)
	}
	code, _, errOut := plan()
	assert.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, errOut, "nothing to import: 1 rows read (1 ambiguous, 0 invalid)", "a day before the cursor: key-30 only (unfinished)")
	code, out, errOut := plan("--since-overlap", "72h")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, errOut, "2 rows read: 1 to import (0 hash-only), 1 ambiguous")
	assert.Contains(t, out, `"read_from":"`+cursorAt.Add(-72*time.Hour).UTC().Format(time.RFC3339Nano)+`//"`)

	amb := filepath.Join(dir, "never.ndjson")
	code, _, errOut = runQ(t, dsn, "import", "plan", "--class", "demo.transfer", "--correction", ledger, "--from-postgres", dbtest.SourceDSN(dsn),
		"--password-env", "IDEMCTL_SOURCE_NOT_SET", "--query", importQuery, "--ambiguous", amb, "--reason", "x", "--since", since)
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, errOut, "IDEMCTL_SOURCE_NOT_SET is not set")
	assert.NoFileExists(t, amb, "a store that cannot be read leaves no file")

	// An unreachable source: exit 1 (docs/exit-codes.md), one line naming
	// the source without its password, nothing planned, no file.
	secret := os.Getenv(dbtest.SourcePasswordEnv)
	require.NotEmpty(t, secret)
	code, out, errOut = runQ(t, dsn, "import", "plan", "--class", "demo.transfer", "--correction", ledger,
		"--from-postgres", "postgres://reader@127.0.0.1:1/store?sslmode=disable&connect_timeout=2",
		"--password-env", dbtest.SourcePasswordEnv, "--query", importQuery, "--ambiguous", amb, "--reason", "x", "--since", since)
	assert.Equal(t, cmdutil.ExitFailure, code, errOut)
	assert.Contains(t, errOut, "idemctl: source: connection refused at 127.0.0.1:1 (DSN from --from-postgres: reader@127.0.0.1:1/store;")
	assert.Equal(t, 1, strings.Count(strings.TrimSuffix(errOut, "\n"), "\n")+1, "one line: %q", errOut)
	assert.NotContains(t, out+errOut, secret)
	assert.NoFileExists(t, amb)
	var plans int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM idem.entry_plan WHERE reason = 'x'").Scan(&plans))
	assert.Zero(t, plans, "nothing planned")
}

// A record plan is not approved or run by idemctl import (exit 5, naming
// idemctl record), and an unknown --class reads no row and creates no file.
func TestImportRefusesARecordPlanAndAnUnknownClass(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	bob := dbtest.As(dsn, dbtest.Operator2)
	dir := t.TempDir()
	file := filepath.Join(dir, "charges.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(`{"tenant_id":"t1","operation_id":"psp-1","class":"demo.transfer","payload":{"to":"bob","from":"alice","amount":900,"currency":"EUR"},"response":{"status":"charged"},"evidence":"psp ch_9"}`+"\n"), 0o644))
	code, _, errOut := runQ(t, dsn, "record", "plan", "--file", file, "--reason", "INC-9", "--correction", "LC-12 by finance", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	m := regexp.MustCompile(`idemctl record approve (\d+)`).FindStringSubmatch(errOut)
	require.Len(t, m, 2, errOut)
	code, _, errOut = run(t, bob, "", "import", "approve", m[1], "--operator", "bob", "--yes", "--from-ndjson", file)
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, errOut, "entry plan "+m[1]+" is a record plan, not an import: approve it with idemctl record approve "+m[1])
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %s", errOut)
	code, _, errOut = runQ(t, dbtest.As(dsn, dbtest.Unmapped), "record", "approve", m[1], "--operator", "carol", "--yes")
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, errOut, "it cannot approve a record plan", "grammar")
	code, _, errOut = run(t, bob, "", "record", "approve", m[1], "--operator", "bob", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, _, errOut = runQ(t, dsn, "import", "run", m[1], "--operator", "alice", "--from-ndjson", file)
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, errOut, "entry plan "+m[1]+" is a record plan, not an import: run it with idemctl record run "+m[1])
	var state string
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT state FROM idem.entry_plan WHERE id = $1", m[1]).Scan(&state))
	assert.Equal(t, "approved", state, "not run")

	amb := filepath.Join(dir, "ambiguous.ndjson")
	code, _, errOut = runQ(t, dsn, "import", "plan", "--class", "rides.nope", "--from-ndjson", filepath.Join(dir, "missing.ndjson"),
		"--ambiguous", amb, "--invalid", filepath.Join(dir, "invalid.ndjson"), "--reason", "MIG-4", "--operator", "alice")
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, errOut, "--class: unknown operation class: rides.nope (idemctl class list shows them); nothing read")
	assert.NoFileExists(t, amb, "no --ambiguous file")
	assert.NoFileExists(t, filepath.Join(dir, "invalid.ndjson"), "no --invalid file")
}
