package horizon_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// TestHorizonEndToEnd drives the whole protocol through the command line
// against a real database: policy, a correction, an archive source, check,
// plan, four-eyes approval, purge, status, and a late replay answered purged.
func TestHorizonEndToEnd(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 4) // alice's login: every command runs as her, but the approval
	bob := dbtest.As(dsn, dbtest.Operator2)
	ctx := context.Background()
	// A projection class (its effect in application code, registered by the
	// schema owner) and 48 of its identities applied ten days ago.
	dbtest.RegisterAppClass(t, dsn, "proj.view", "forever")
	dbtest.Seed(t, dsn, "proj.view", "t1", "op-", 48, 10*24*time.Hour, time.Hour)

	code, out, _ := runQ(t, dsn, "class", "list", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, `"class":"demo.transfer","retention":"forever"`)
	// A money declaration: one person declares it; removing it is planned.
	code, out, errOut := runQ(t, dsn, "class", "set", "demo.transfer", "--money", "/amount,/currency,minor", "--operator", "alice", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	// The message wraps at 80 columns: its words, in order.
	assert.Contains(t, strings.Join(strings.Fields(out), " "), "class demo.transfer: moves money (amount /amount, currency /currency, minor units)")
	code, _, _ = runQ(t, dsn, "class", "set", "demo.transfer", "--money", "/amount")
	assert.Equal(t, cmdutil.ExitUsage, code)
	code, out, _ = runQ(t, dsn, "class", "list", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "/amount,/currency,minor")
	code, out, errOut = runQ(t, dsn, "class", "set", "demo.transfer", "--money", "none", "--reason", "test", "--operator", "alice", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "planned as change 1")
	code, _, _ = runQ(t, dsn, "change", "abort", "1", "--reason", "not now", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code)

	// forever without contract is refused.
	code, _, errOut = runQ(t, dsn, "horizon", "plan", "--class", "proj.view", "--before", "5d", "--operator", "alice")
	assert.Equal(t, cmdutil.ExitInvalid, code)
	assert.Contains(t, errOut, "contract")
	// Making a forever class purgeable by horizon alone needs a reason.
	code, _, errOut = runQ(t, dsn, "class", "set", "proj.view", "--retention", "horizon", "--min-age", "1d")
	assert.Equal(t, cmdutil.ExitInvalid, code)
	assert.Contains(t, errOut, "needs a reason")
	// ...and a confirmation: --yes without a terminal.
	code, _, errOut = runQ(t, dsn, "class", "set", "proj.view", "--retention", "horizon", "--min-age", "1d",
		"--reason", "a projection, rebuilt nightly")
	assert.Equal(t, cmdutil.ExitUsage, code)
	assert.Contains(t, errOut, "--yes")
	code, out, errOut = runQ(t, dsn, "class", "set", "proj.view", "--retention", "horizon", "--min-age", "1d",
		"--reason", "a projection, rebuilt nightly", "-o", "json", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	// ...and another person: it is planned, and bob's approval applies it.
	assert.Contains(t, out, `"retention":"forever"`)
	assert.Contains(t, out, `"applied":false`)
	assert.Contains(t, out, `"change_id":2`)
	code, out, errOut = runQ(t, dsn, "change", "approve", "2", "--operator", "alice", "--yes")
	assert.Equal(t, cmdutil.ExitInvalid, code, "not by the planner's person: %s", out)
	assert.Contains(t, errOut, "another person")
	code, _, errOut = runQ(t, bob, "change", "approve", "2", "--operator", "bob", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, out, _ = runQ(t, dsn, "class", "list", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, `"class":"proj.view","retention":"horizon"`)
	code, _, _ = runQ(t, dsn, "class", "set", "no.such", "--retention", "horizon")
	assert.Equal(t, cmdutil.ExitInvalid, code)

	code, out, _ = runQ(t, dsn, "corrections", "add", "--tenant", "t1", "--op", "op-2", "--reason", "refund pending", "-o", "json", "--operator", "carol")
	require.Equal(t, cmdutil.ExitOK, code)
	var corr horizon.Correction
	require.NoError(t, json.Unmarshal([]byte(out), &corr))
	code, out, _ = runQ(t, dsn, "corrections", "list", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "refund pending")

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.ndjson"), []byte(`{"tenant":"t1","operation_id":"op-3","ts":"2026-01-01T00:00:00Z"}`+"\n"), 0o644))
	code, _, errOut = runQ(t, dsn, "horizon", "source", "add", "archive", "--kind", "archive", "--dir", dir, "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	// A source's password is never stored: a DSN holding one is refused,
	// and not echoed.
	sources := rsvCount(t, pool, "SELECT count(*) FROM idem.horizon_source")
	code, out, errOut = runQ(t, dsn, "horizon", "source", "add", "pg", "--kind", "postgres", "--source-dsn", "postgres://u:hunter2@127.0.0.1:5432/x",
		"--query", "SELECT now() - interval '1 hour'", "--operator", "alice", "--timeout", "3s")
	assert.Equal(t, cmdutil.ExitUsage, code)
	assert.Contains(t, errOut, "secrets are never stored")
	assert.NotContains(t, out+errOut, "hunter2")
	assert.Equal(t, sources, rsvCount(t, pool, "SELECT count(*) FROM idem.horizon_source"))
	// It names the variable that holds the password instead; this one is not
	// set, so the source cannot be probed.
	code, _, errOut = runQ(t, dsn, "horizon", "source", "add", "pg", "--kind", "postgres", "--source-dsn", "postgres://u@127.0.0.1:5432/x",
		"--password-env", "IDEMCTL_SOURCE_NEVER_SET_PASSWORD", "--query", "SELECT now() - interval '1 hour'", "--operator", "alice", "--timeout", "3s")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, out, _ = runQ(t, dsn, "horizon", "source", "list", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, `"name":"archive"`)
	assert.Contains(t, out, `"password_env":"IDEMCTL_SOURCE_NEVER_SET_PASSWORD"`)

	// The pg source cannot be probed: not proven (exit 5), and it says why.
	code, out, errOut = runQ(t, dsn, "horizon", "check", "--class", "proj.view", "--before", "5d", "-o", "table")
	assert.Equal(t, cmdutil.ExitInvalid, code)
	assert.Contains(t, out, "NOT proven")
	assert.Contains(t, out+errOut, "IDEMCTL_SOURCE_NEVER_SET_PASSWORD")
	assert.Contains(t, out, "safe cutoff: NOT proven", "a source that failed bounds nothing: no cutoff is called safe")
	// Without --before as well: no time is offered as the safe cutoff.
	code, out, _ = runQ(t, dsn, "horizon", "check", "--class", "proj.view", "-o", "table")
	assert.Equal(t, cmdutil.ExitInvalid, code)
	assert.Contains(t, out, "safe cutoff: NOT proven")
	assert.NotRegexp(t, `safe cutoff: \d`, out)
	// Removing a source needs a second person: alice plans, bob approves.
	code, _, errOut = runQ(t, dsn, "horizon", "source", "remove", "pg", "--operator", "alice")
	require.Equal(t, cmdutil.ExitUsage, code, "a reason is required: %s", errOut)
	code, out, errOut = runQ(t, dsn, "horizon", "source", "remove", "pg", "--operator", "alice", "--reason", "never reachable")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "another person approves it")
	code, _, errOut = runQ(t, dsn, "change", "approve", "3", "--operator", "alice", "--yes")
	assert.Equal(t, cmdutil.ExitInvalid, code, "alice cannot approve her own removal")
	assert.Contains(t, errOut, "another person must approve")
	code, out, errOut = run(t, bob, "", "change", "approve", "3", "--operator", "bob", "-o", "table", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "bob (idemctl_test_operator2)")

	code, out, _ = runQ(t, dsn, "horizon", "check", "--class", "proj.view", "--before", "5d", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, out)
	var rep horizon.CheckReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.True(t, rep.Proven)
	assert.Len(t, rep.Evidence, 2)

	code, out, errOut = runQ(t, dsn, "horizon", "plan", "--class", "proj.view", "--before", "5d", "-o", "json", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	var p horizon.Plan
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.NotZero(t, p.ID)
	assert.EqualValues(t, 2, p.Pinned, "the correction and the archived identity")
	id := strconv.FormatInt(p.ID, 10)

	// Four eyes compare persons: alice's login cannot approve her own plan,
	// whatever --operator says, nor can a login that maps to no person.
	for _, label := range []string{"alice", "bob"} {
		code, _, errOut = runQ(t, dsn, "horizon", "approve", id, "--yes", "--operator", label)
		assert.Equal(t, cmdutil.ExitInvalid, code, "four-eyes: same person, labelled %s", label)
		assert.Contains(t, errOut, "four eyes")
	}
	code, _, errOut = runQ(t, dbtest.As(dsn, dbtest.Unmapped), "horizon", "approve", id, "--yes", "--operator", "carol")
	assert.Equal(t, cmdutil.ExitInvalid, code)
	assert.Contains(t, errOut, "maps to no person")
	code, out, _ = runQ(t, dsn, "horizon", "status", id, "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, `"state":"planned"`, "nothing approved it")
	code, _, errOut = runQ(t, dsn, "horizon", "purge", id, "--operator", "alice")
	assert.Equal(t, cmdutil.ExitUsage, code, "no terminal, no --yes")
	assert.Contains(t, errOut, "--yes")
	code, _, errOut = runQ(t, dsn, "horizon", "purge", id, "--yes", "--operator", "alice")
	assert.Equal(t, cmdutil.ExitInvalid, code, "not approved yet")
	assert.Contains(t, errOut, "approve")
	// Bob, another person with his own login, approves.
	code, out, errOut = runQ(t, bob, "horizon", "approve", id, "--yes", "--operator", "bob", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	var approved horizon.Plan
	require.NoError(t, json.Unmarshal([]byte(out), &approved))
	assert.Equal(t, horizon.StateApproved, approved.State)
	assert.Equal(t, dbtest.PersonOperator, approved.PlannedPerson)
	assert.Equal(t, dbtest.PersonOperator2, approved.ApprovedPerson)

	code, out, errOut = runQ(t, dsn, "horizon", "purge", id, "--yes", "--operator", "alice", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	var res horizon.PurgeResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, p.Candidates, res.Plan.Purged)
	assert.Equal(t, horizon.StateDone, res.Plan.State)

	code, out, _ = runQ(t, dsn, "horizon", "status", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "done")

	// inspect shows what is left of a purged identity: its tombstone.
	var purgedOp string
	require.NoError(t, pool.QueryRow(ctx, "SELECT operation_id FROM idem.tombstone WHERE tenant_id = 't1' LIMIT 1").Scan(&purgedOp))
	code, out, errOut = runQ(t, dsn, "inspect", "--tenant", "t1", "--op", purgedOp, "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, `"purged":true`)
	assert.Contains(t, out, `"purge_plan":`+id)
	assert.NotContains(t, out, `"payload"`)
	code, out, _ = runQ(t, dsn, "horizon", "status", id, "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, `"state":"done"`)

	code, out, _ = runQ(t, dbtest.As(dsn, dbtest.Auditor), "audit", "list", "--action", "horizon", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	for _, a := range []string{"horizon.plan", "horizon.approve", "horizon.purge.start", "horizon.purge.finish", "horizon.class.set", "horizon.correction.add", "horizon.source.add"} {
		assert.Contains(t, out, `"action":"`+a+`"`, a)
	}

	// Marking a correction done is planned; another person's approval marks it.
	code, out, _ = runQ(t, dsn, "corrections", "done", "1", "--operator", "carol", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, out)
	m := regexp.MustCompile(`\n  another person approves it: idemctl change approve (\d+)\n`).FindStringSubmatch(out)
	require.NotNil(t, m, "the command to type next, whole, on its own line: %q", out)
	code, out, _ = runQ(t, dsn, "corrections", "list", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, `"id":1,`, "still pending until approved")
	code, _, errOut = runQ(t, bob, "change", "approve", m[1], "--operator", "bob", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, _, _ = runQ(t, dsn, "corrections", "done", "1", "--operator", "carol")
	assert.Equal(t, cmdutil.ExitNotFound, code, "no such pending correction")
	code, out, _ = runQ(t, dsn, "horizon", "maintain", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "partition(s) created")
	code, out, _ = runQ(t, dsn, "horizon", "maintain", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, `{"partitions_created":`)

	// A plan can be cancelled, with a reason; then it is never purged.
	code, out, errOut = runQ(t, dsn, "horizon", "plan", "--class", "proj.view", "--before", "5d", "-o", "json", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	id = strconv.FormatInt(p.ID, 10)
	code, _, _ = runQ(t, dsn, "horizon", "cancel", id)
	assert.Equal(t, cmdutil.ExitUsage, code, "a reason is required")
	code, out, errOut = runQ(t, bob, "horizon", "cancel", id, "--reason", "wrong class", "--operator", "bob", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "aborted by bob: wrong class")
	code, _, _ = runQ(t, bob, "horizon", "approve", id, "--yes", "--operator", "bob")
	assert.Equal(t, cmdutil.ExitInvalid, code)
	code, _, _ = runQ(t, dsn, "horizon", "cancel", id, "--reason", "again")
	assert.Equal(t, cmdutil.ExitInvalid, code, "already aborted")
}
