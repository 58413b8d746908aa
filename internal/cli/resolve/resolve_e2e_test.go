package resolve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/dbtest"
)

func TestResolveCommand(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	ctx := context.Background()
	// The service applied acme/seen (the app role); resolve runs as an operator.
	_, err := idem.Execute(ctx, dbtest.PoolAs(t, dsn, dbtest.App, 1), idem.Command{Identity: idem.Identity{TenantID: "acme", OperationID: "seen"}, Class: "demo.transfer",
		Payload: []byte(`{"from":"alice","to":"bob","amount":100,"currency":"EUR"}`)})
	require.NoError(t, err)

	t.Run("single operation, table", func(t *testing.T) {
		code, out, _ := run(t, dsn, "", "resolve", "-o", "table", "--tenant", "acme", "--op", "single", "--class", "demo.transfer",
			"--payload", `{"from":"alice","to":"bob","amount":3,"currency":"EUR"}`)
		require.Equal(t, cmdutil.ExitOK, code)
		assert.Contains(t, out, "applied")
		assert.Contains(t, out, "posting_id")
		code, out, _ = run(t, dsn, "", "resolve", "-o", "table", "--tenant", "acme", "--op", "single", "--class", "demo.transfer",
			"--payload", `{"to":"bob","from":"alice","currency":"EUR","amount":3}`)
		require.Equal(t, cmdutil.ExitOK, code)
		assert.Contains(t, out, "already_applied")
		code, out, _ = run(t, dsn, "", "resolve", "-o", "table", "--tenant", "acme", "--op", "single", "--class", "demo.transfer",
			"--payload", `{"to":"bob","from":"alice","currency":"EUR","amount":4}`)
		require.Equal(t, cmdutil.ExitConflict, code)
		assert.Contains(t, out, "quarantine_id")
	})

	t.Run("batch, json, exit 3 on a conflict", func(t *testing.T) {
		before := rsvCounts(t, pool)
		file := rsvFile(t, rsvLine("acme", "seen", 100), rsvLine("acme", "b-new", 1), rsvLine("acme", "seen", 101), "garbage")
		code, out, errOut := run(t, dsn, "", "resolve", "-o", "json", "--file", file)
		require.Equal(t, cmdutil.ExitConflict, code, errOut)
		rows := rsvJSON(t, out)
		require.Len(t, rows, 4)
		for _, key := range []string{"tenant", "operation_id", "class", "outcome", "response", "stored_hash", "incoming_hash", "quarantine_id", "error"} {
			assert.Contains(t, rows[0], key)
		}
		assert.Equal(t, "already_applied", rows[0]["outcome"])
		assert.NotNil(t, rows[0]["response"])
		assert.Equal(t, "applied", rows[1]["outcome"])
		assert.Equal(t, "conflict", rows[2]["outcome"])
		assert.NotNil(t, rows[2]["quarantine_id"])
		assert.Nil(t, rows[2]["response"])
		assert.Equal(t, "invalid", rows[3]["outcome"])
		assert.Contains(t, rows[3]["error"], "not JSON")
		assert.Contains(t, errOut, "4 operations: 1 already_applied, 1 applied, 1 conflict, 1 invalid")
		assert.Equal(t, [3]int{before[0] + 1, before[1] + 1, before[2] + 1}, rsvCounts(t, pool))
	})

	t.Run("stdin, exit 0 then again all already applied", func(t *testing.T) {
		input := rsvLine("acme", "s-1", 1) + "\n" + rsvLine("acme", "s-2", 2) + "\n"
		code, out, _ := run(t, dsn, input, "resolve", "-o", "json", "--file", "-")
		require.Equal(t, cmdutil.ExitOK, code)
		assert.Equal(t, []any{"applied", "applied"}, []any{rsvJSON(t, out)[0]["outcome"], rsvJSON(t, out)[1]["outcome"]})
		code, out, _ = run(t, dsn, input, "resolve", "-o", "json", "--file", "-")
		require.Equal(t, cmdutil.ExitOK, code)
		assert.Equal(t, []any{"already_applied", "already_applied"}, []any{rsvJSON(t, out)[0]["outcome"], rsvJSON(t, out)[1]["outcome"]})
	})

	t.Run("bad lines exit 5, empty file exit 0", func(t *testing.T) {
		code, out, _ := run(t, dsn, "", "resolve", "-o", "table", "--file", rsvFile(t, "{", `{"tenant":"t"}`, "[]"))
		require.Equal(t, cmdutil.ExitInvalid, code)
		assert.Contains(t, out, "invalid")
		assert.Contains(t, out, "Needs attention")
		assert.Contains(t, out, "missing field operation_id")
		code, out, _ = run(t, dsn, "", "resolve", "-o", "table", "--file", rsvFile(t, rsvLine("acme", "e-1", 1), `{"tenant":"acme","operation_id":"e-2","class":"demo.transfer","payload":{"amount":-1}}`))
		require.Equal(t, cmdutil.ExitInvalid, code, "a failed effect")
		assert.Contains(t, out, "error")
		code, out, _ = run(t, dsn, "", "resolve", "-o", "table", "--file", rsvFile(t))
		require.Equal(t, cmdutil.ExitOK, code)
		assert.Contains(t, out, "0 operations")
	})

	t.Run("dry run writes nothing, report file while the terminal shows the summary", func(t *testing.T) {
		before := rsvCounts(t, pool)
		audits := rsvCount(t, pool, "SELECT count(*) FROM idem.audit WHERE action = 'resolve.run'")
		report := filepath.Join(t.TempDir(), "report.ndjson")
		file := rsvFile(t, rsvLine("acme", "seen", 100), rsvLine("acme", "d-new", 1), rsvLine("acme", "seen", 102))
		code, out, _ := run(t, dsn, "", "resolve", "-o", "table", "--dry-run", "--report", report, "--file", file, "--operator", "ada")
		require.Equal(t, cmdutil.ExitConflict, code)
		assert.Contains(t, out, "would_apply")
		assert.Contains(t, out, "would_conflict")
		assert.Contains(t, out, "dry run, nothing written")
		body, err := os.ReadFile(report)
		require.NoError(t, err)
		rows := rsvJSON(t, string(body))
		require.Len(t, rows, 3)
		assert.Equal(t, "already_applied", rows[0]["outcome"])
		assert.Equal(t, "would_apply", rows[1]["outcome"])
		assert.Equal(t, "would_conflict", rows[2]["outcome"])
		assert.Equal(t, before, rsvCounts(t, pool))
		// The run itself is recorded, with who and the counts.
		assert.Equal(t, audits+1, rsvCount(t, pool, "SELECT count(*) FROM idem.audit WHERE action = 'resolve.run'"))
		var actor, dbUser, person string
		var details map[string]any
		require.NoError(t, pool.QueryRow(ctx, "SELECT actor, db_user, person, details::jsonb FROM idem.audit WHERE action = 'resolve.run' ORDER BY id DESC LIMIT 1").
			Scan(&actor, &dbUser, &person, &details))
		assert.Equal(t, "ada", actor, "the --operator label, for the record")
		assert.Equal(t, string(dbtest.Operator), dbUser, "the login that ran it")
		assert.Equal(t, dbtest.PersonOperator, person, "the person behind the login")
		assert.Equal(t, true, details["dry_run"])
		assert.Equal(t, map[string]any{"already_applied": 1.0, "would_apply": 1.0, "would_conflict": 1.0}, details["counts"])
	})
}

// A read-only session on the primary: exit 4, one line, nothing written.
func TestResolveReadOnlySession(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.RawQuery += "&options=-c%20default_transaction_read_only%3Don"
	before := rsvCounts(t, pool)
	file := rsvFile(t, rsvLine("acme", "ro-1", 1))
	for _, args := range [][]string{
		{"resolve", "--file", file},
		{"resolve", "--file", file, "--dry-run"},
		{"resolve", "--tenant", "acme", "--op", "ro-2", "--class", "demo.transfer", "--payload", `{"amount":1}`},
	} {
		code, out, errOut := run(t, u.String(), "", args...)
		assert.Equal(t, cmdutil.ExitNotPrimary, code, "%v", args)
		assert.Empty(t, out)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
		assert.Contains(t, errOut, "read-only")
		assert.Contains(t, errOut, "target_session_attrs=read-write")
	}
	assert.Equal(t, before, rsvCounts(t, pool))

	// --report is left alone by a refused run: it is created only once the
	// database has passed the check.
	report := filepath.Join(t.TempDir(), "report.ndjson")
	require.NoError(t, os.WriteFile(report, []byte("yesterday's report\n"), 0o600))
	code, _, errOut := run(t, u.String(), "", "resolve", "--file", file, "--report", report, "--overwrite")
	assert.Equal(t, cmdutil.ExitNotPrimary, code, errOut)
	body, err := os.ReadFile(report)
	require.NoError(t, err)
	assert.Equal(t, "yesterday's report\n", string(body))
}

// Invalid single-operation flags are a usage error before connecting:
// nothing is written, not even the run's audit record.
func TestResolveBadSingleOperationWritesNothing(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	audits := rsvCount(t, pool, "SELECT count(*) FROM idem.audit")
	before := rsvCounts(t, pool)
	for _, args := range [][]string{
		{"--tenant", "", "--op", "o", "--class", "demo.transfer", "--payload", "{}"},
		{"--tenant", "acme", "--op", "o", "--class", "demo.transfer", "--payload", `{"amount":`},
	} {
		code, out, errOut := run(t, dsn, "", append([]string{"resolve"}, args...)...)
		assert.Equal(t, cmdutil.ExitUsage, code, "%v: %s", args, errOut)
		assert.Empty(t, out)
	}
	assert.Equal(t, audits, rsvCount(t, pool, "SELECT count(*) FROM idem.audit"), "no run recorded")
	assert.Equal(t, before, rsvCounts(t, pool))
}

// lastAudit is the details of the newest resolve.run record (stored as the
// exact JSON text that was hashed).
func lastAudit(t *testing.T, pool *pgxpool.Pool) map[string]any {
	t.Helper()
	var details map[string]any
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT details::jsonb FROM idem.audit WHERE action = 'resolve.run' ORDER BY id DESC LIMIT 1").Scan(&details))
	return details
}

// A report that cannot be written (a full disk) stops the run: nothing more
// is read, what ran is counted (not what was written) and recorded, and one
// line names the error, with exit code 1.
func TestResolveReportWriteFails(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		// Linux always has it; elsewhere the write failure cannot be staged.
		skipLoudly(t, "/dev/full is missing (%v): the full-disk write error cannot be staged here", err)
	}
	pool, dsn := dbtest.NewPool(t, 2)
	const n = 3000
	lines := make([]string, n)
	for i := range lines {
		lines[i] = rsvLine("acme", fmt.Sprint("full-", i), i+1)
	}
	code, out, errOut := run(t, dsn, "", "resolve", "-o", "table", "--file", rsvFile(t, lines...), "--report", "/dev/full", "--overwrite")
	require.Equal(t, cmdutil.ExitFailure, code, errOut)
	msgs := idemctlLines(errOut)
	require.Len(t, msgs, 1, errOut)
	assert.Contains(t, msgs[0], "write results")
	assert.Contains(t, msgs[0], "no space left on device")
	assert.Contains(t, msgs[0], "nothing after it was attempted")
	postings := rsvCount(t, pool, "SELECT count(*) FROM demo.posting")
	assert.Less(t, postings, n, "the run stopped")
	assert.Contains(t, out, fmt.Sprintf("%d applied", postings), "the summary counts what ran")
	details := lastAudit(t, pool)
	assert.Equal(t, map[string]any{"applied": float64(postings)}, details["counts"])
	assert.Contains(t, details["write_error"], "no space left on device")
	assert.Equal(t, true, details["interrupted"])
}

// `idemctl resolve -o json | head -1`: the closed pipe is a write error, not a
// SIGPIPE that kills the process: the run stops, is recorded with true
// counts, and exits 1 with one line naming the error.
func TestResolveClosedPipe(t *testing.T) {
	t.Parallel()
	bin := idemctlBinary(t)
	pool, dsn := dbtest.NewPool(t, 2)
	const n = 3000
	lines := make([]string, n)
	for i := range lines {
		lines[i] = rsvLine("acme", fmt.Sprint("pipe-", i), i+1)
	}
	cmd := exec.Command(bin, "resolve", "--file", rsvFile(t, lines...), "-o", "json", "--dsn", dsn)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	first, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	assert.Contains(t, first, `"outcome":"applied"`)
	require.NoError(t, stdout.Close()) // what head does after one line
	err = cmd.Wait()
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr, stderr.String())
	require.Equal(t, cmdutil.ExitFailure, exitErr.ExitCode(), "exit 1, not killed by SIGPIPE: %v\n%s", err, stderr.String())
	msgs := idemctlLines(stderr.String())
	require.Len(t, msgs, 1, stderr.String())
	assert.Contains(t, msgs[0], "broken pipe")
	postings := rsvCount(t, pool, "SELECT count(*) FROM demo.posting")
	assert.Less(t, postings, n, "the run stopped")
	details := lastAudit(t, pool)
	assert.Equal(t, map[string]any{"applied": float64(postings)}, details["counts"], "the record counts what ran")
	assert.Contains(t, details["write_error"], "broken pipe")
}

// The database goes away mid-run and stays away: the run stops after
// --retry-for with exit code 1 and one line saying so and where the input
// stopped; every line reported is applied and in the database.
func TestResolveDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	proxy, proxied := dbtest.NewProxy(t, dsn)
	const n = 600
	lines := make([]string, n)
	for i := range lines {
		lines[i] = rsvLine("acme", fmt.Sprint("gone-", i), i+1)
	}
	cutAfter(pool, proxy, "gone-%", "")
	code, out, errOut := run(t, proxied, "", "resolve", "--file", rsvFile(t, lines...), "-o", "json", "--max-rate", "300", "--retry-for", "1s")
	require.Equal(t, cmdutil.ExitFailure, code, errOut)
	msgs := idemctlLines(errOut)
	last := msgs[len(msgs)-1]
	assert.Contains(t, last, "database unreachable for")
	assert.Contains(t, last, "nothing after it was attempted")
	assert.Contains(t, last, "rerun is safe")
	assert.NotContains(t, errOut, "\"error\"")
	assert.Contains(t, errOut, "resolve: ", "the summary so far")
	rows := rsvJSON(t, out)
	require.NotEmpty(t, rows)
	inbox := rsvCount(t, pool, "SELECT count(*) FROM idem.inbox")
	assert.GreaterOrEqual(t, inbox, len(rows))
	for _, row := range rows {
		assert.Equal(t, "applied", row["outcome"], "%v", row)
		assert.Equal(t, 1, rsvCount(t, pool, fmt.Sprintf("SELECT count(*) FROM idem.inbox WHERE operation_id = '%s'", row["operation_id"])))
	}
}

// cutAfter cuts proxy once 50 postings of operations LIKE pattern exist, then
// forwards new connections to restoreTo if it is not empty; it gives up after
// a minute.
func cutAfter(pool *pgxpool.Pool, proxy *dbtest.Proxy, pattern, restoreTo string) {
	go func() {
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			var n int
			err := pool.QueryRow(context.Background(), "SELECT count(*) FROM demo.posting WHERE operation_id LIKE $1", pattern).Scan(&n)
			if err == nil && n >= 50 {
				proxy.Cut()
				if restoreTo != "" {
					proxy.Restore(restoreTo)
				}
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
}

// Ctrl-C in the middle of a batch: in-flight operations finish whole, the
// summary so far is printed, and running the same file again is safe.
func TestResolveSIGINTThenRerun(t *testing.T) {
	t.Parallel()
	bin := idemctlBinary(t)
	pool, dsn := dbtest.NewPool(t, 2)
	const n = 2000
	lines := make([]string, n)
	for i := range lines {
		lines[i] = rsvLine("acme", fmt.Sprint("int-", i), i+1)
	}
	file := rsvFile(t, lines...)

	cmd := exec.Command(bin, "resolve", "--file", file, "-o", "json", "--max-rate", "400", "--dsn", dsn)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stdout)
	var outcomes []string
	for sc.Scan() {
		var row map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &row))
		outcomes = append(outcomes, row["outcome"].(string))
		if len(outcomes) == 100 {
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		}
	}
	err = cmd.Wait()
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr, stderr.String())
	assert.Equal(t, cmdutil.ExitFailure, exitErr.ExitCode(), stderr.String())
	assert.Contains(t, stderr.String(), "interrupted")
	done := len(outcomes)
	require.GreaterOrEqual(t, done, 100)
	require.Less(t, done, n, "the run stopped early")
	for _, o := range outcomes {
		require.Equal(t, "applied", o)
	}
	assert.Equal(t, done, rsvCount(t, pool, "SELECT count(*) FROM demo.posting"), "every reported operation committed, nothing else")
	assert.Equal(t, done, rsvCount(t, pool, "SELECT count(*) FROM idem.inbox"))
	assert.Equal(t, 1, rsvCount(t, pool, "SELECT count(*) FROM idem.audit WHERE action = 'resolve.run' AND (details::jsonb ->> 'interrupted')::boolean"))

	out, err := exec.Command(bin, "resolve", "--file", file, "-o", "json", "--dsn", dsn).Output()
	require.NoError(t, err)
	counts := map[string]int{}
	for _, row := range rsvJSON(t, string(out)) {
		counts[row["outcome"].(string)]++
	}
	assert.Equal(t, map[string]int{"already_applied": done, "applied": n - done}, counts)
	assert.Equal(t, n, rsvCount(t, pool, "SELECT count(*) FROM demo.posting"))
}

var _ = db.Describe
