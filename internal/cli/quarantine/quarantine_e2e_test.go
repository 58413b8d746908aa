package quarantine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
)

func TestQuarantineCommands(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	dsn := fx.DSN
	// The installation's own audit rows (class registrations, persons) come first.
	base := fx.Count(t, "SELECT last_id FROM idem.audit_head")
	q1 := fx.Conflict(t, "acme", "charge-1", 1250, 1350)
	q2 := fx.Conflict(t, "acme", "bet-7", 500, 650)
	q3 := fx.Conflict(t, "globex", "charge-9", 10, 11)

	// list
	code, out, errOut := runQ(t, dsn, "quarantine", "list", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	rows := jsonLines(t, out)
	require.Len(t, rows, 3)
	for _, k := range []string{"id", "tenant", "operation_id", "class", "status", "occurrences", "first_seen", "last_seen", "cursor"} {
		assert.Contains(t, rows[0], k)
	}
	assert.Equal(t, float64(q3), rows[0]["id"], "newest activity first")
	assert.Equal(t, "open", rows[0]["status"])

	code, out, errOut = runQ(t, dsn, "quarantine", "list", "--tenant", "acme", "--limit", "1", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	rows = jsonLines(t, out)
	require.Len(t, rows, 1)
	assert.Equal(t, float64(q2), rows[0]["id"])
	require.Contains(t, errOut, "--after "+rows[0]["cursor"].(string))
	code, out, _ = runQ(t, dsn, "quarantine", "list", "--tenant", "acme", "--limit", "1", "--after", rows[0]["cursor"].(string), "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	rows = jsonLines(t, out)
	require.Len(t, rows, 1)
	assert.Equal(t, float64(q1), rows[0]["id"])

	code, out, _ = runQ(t, dsn, "quarantine", "list", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "charge-9")
	assert.Contains(t, strings.ToUpper(out), "CHANGES")

	// show
	code, out, _ = runQ(t, dsn, "quarantine", "show", fmt.Sprint(q1), "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rec))
	assert.Equal(t, []any{map[string]any{"path": "/amount", "change": "changed", "stored": float64(1250), "incoming": float64(1350)}}, rec["diff"])
	assert.Equal(t, "acme", rec["tenant"])
	code, out, _ = runQ(t, dsn, "quarantine", "show", fmt.Sprint(q1), "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "What changed (1)")
	assert.Regexp(t, `changed\s*│\s*/amount\s*│\s*1250\s*│\s*1350`, out)

	// reject, then a second decision is refused
	code, out, errOut = runQ(t, dsn, "quarantine", "reject", fmt.Sprint(q1), "--yes", "--reason", "tampered amount", "--operator", "alice", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &rec))
	assert.Equal(t, "rejected", rec["status"])
	decision := rec["decision"].(map[string]any)
	assert.Equal(t, "alice", decision["decided_by"])
	assert.Equal(t, dbtest.PersonOperator, decision["person"], "the person behind the login, whatever --operator says")
	assert.Equal(t, string(dbtest.Operator), decision["db_user"])
	code, _, errOut = runQ(t, dsn, "quarantine", "reject", fmt.Sprint(q1), "--yes", "--reason", "again", "--operator", "bob")
	assert.Equal(t, cmdutil.ExitInvalid, code)
	assert.Contains(t, errOut, "already rejected by alice")

	// accept-as-new without a terminal needs --yes: nothing happens without it
	code, _, errOut = runQ(t, dsn, "quarantine", "accept-as-new", fmt.Sprint(q2), "--new-operation-id", "bet-7-rev2",
		"--reason", "settlement revision", "--operator", "carol")
	assert.Equal(t, cmdutil.ExitUsage, code)
	assert.Contains(t, errOut, "--yes")
	assert.Equal(t, 0, fx.Count(t, "SELECT count(*) FROM idem.inbox WHERE operation_id = 'bet-7-rev2'"))
	code, out, errOut = runQ(t, dsn, "quarantine", "accept-as-new", fmt.Sprint(q2), "--new-operation-id", "bet-7-rev2",
		"--reason", "settlement revision", "--operator", "carol", "-o", "json", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	var acc map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &acc))
	assert.Equal(t, "applied", acc["outcome"])
	assert.Equal(t, "bet-7-rev2", acc["new_operation_id"])
	assert.Equal(t, 1, fx.Count(t, "SELECT count(*) FROM demo.posting WHERE operation_id = 'bet-7-rev2' AND amount = 650"))

	// accept-as-new onto an identity that holds another payload: nothing written
	_, err := idem.Execute(fx.Ctx, fx.App, idem.Command{Identity: idem.Identity{TenantID: "globex", OperationID: "taken"},
		Class: "demo.transfer", Payload: []byte(`{"from":"x","to":"y","amount":999,"currency":"EUR"}`)})
	require.NoError(t, err)
	auditRows := fx.Count(t, "SELECT count(*) FROM idem.audit")
	code, _, errOut = runQ(t, dsn, "quarantine", "accept-as-new", fmt.Sprint(q3), "--new-operation-id", "taken",
		"--reason", "oops", "--operator", "carol", "--yes")
	assert.Equal(t, cmdutil.ExitInvalid, code)
	assert.Contains(t, errOut, "already exists with another payload")
	assert.Equal(t, auditRows, fx.Count(t, "SELECT count(*) FROM idem.audit"))
	assert.Equal(t, 1, fx.Count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'open'"))

	// unknown ids
	code, _, errOut = runQ(t, dsn, "quarantine", "show", "999999")
	assert.Equal(t, cmdutil.ExitNotFound, code)
	assert.Contains(t, errOut, "not found")
	code, _, _ = runQ(t, dsn, "quarantine", "reject", "999999", "--yes", "--reason", "x")
	assert.Equal(t, cmdutil.ExitNotFound, code)
	code, _, _ = runQ(t, dsn, "quarantine", "accept-as-new", "999999", "--reason", "x", "--new-operation-id", "n", "--yes")
	assert.Equal(t, cmdutil.ExitNotFound, code)
	missing := filepath.Join(t.TempDir(), "never.json")
	code, _, _ = runQ(t, dsn, "quarantine", "export", "999999", "--file", missing)
	assert.Equal(t, cmdutil.ExitNotFound, code)
	assert.NoFileExists(t, missing, "a failed export leaves no file")
	assert.Equal(t, auditRows, fx.Count(t, "SELECT count(*) FROM idem.audit"))

	// export
	file := filepath.Join(t.TempDir(), "q3.json")
	code, _, errOut = runQ(t, dsn, "quarantine", "export", fmt.Sprint(q3), "--file", file, "--operator", "dave")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var b quarantine.Bundle
	require.NoError(t, json.Unmarshal(raw, &b))
	assert.True(t, b.Verified)
	assert.Equal(t, b.Incoming.Hash, idem.HashCanonical([]byte(b.Incoming.CanonicalPayload)))
	assert.Equal(t, "dave", b.ExportedBy)
	exported := fx.Count(t, "SELECT count(*) FROM idem.audit")
	code, _, errOut = runQ(t, dsn, "quarantine", "export", fmt.Sprint(q3), "--file", file)
	assert.Equal(t, cmdutil.ExitUsage, code, "an existing output file is a usage error, as for resolve --report and reconcile --emit-*")
	assert.Contains(t, errOut, "--file "+file+" already exists: choose another file (an export is never overwritten)")
	again, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, raw, again, "the existing file is not overwritten")
	assert.Equal(t, exported, fx.Count(t, "SELECT count(*) FROM idem.audit"), "nor a second export recorded")
	code, out, _ = runQ(t, dsn, "quarantine", "export", fmt.Sprint(q3), "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Equal(t, 1, strings.Count(out, "\n"), "-o json: one line")

	// every decision and export is in the audit log, which the auditor reads
	// and verifies
	auditor := dbtest.As(dsn, dbtest.Auditor)
	code, out, _ = runQ(t, auditor, "audit", "list", "--action", "quarantine", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	var actions []string
	for _, r := range jsonLines(t, out) {
		actions = append(actions, r["action"].(string))
		assert.Equal(t, string(dbtest.Operator), r["db_user"])
	}
	assert.Equal(t, []string{"quarantine.export", "quarantine.export", "quarantine.accept_as_new", "quarantine.reject"}, actions)
	code, out, _ = runQ(t, auditor, "audit", "verify", "-o", "table")
	assert.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, fmt.Sprintf("audit chain intact: %d rows", base+4))
}

func TestQuarantineAcceptAsksOnATerminal(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	dsn := fx.DSN
	q := fx.Conflict(t, "acme", "charge-1", 1, 2)
	for _, answer := range []string{"n\n", "y\n"} {
		ios, in, _, errOut := cmdutil.Test(true)
		in.WriteString(answer)
		f := cmdutil.NewFactory(ios)
		code := cli.Run(context.Background(), f, []string{"quarantine", "accept-as-new", fmt.Sprint(q), "--new-operation-id", "charge-1-fix",
			"--reason", "corrected amount", "--dsn", dsn})
		f.Close()
		assert.Contains(t, errOut.String(), "as operation acme/charge-1-fix? [y/N]")
		if answer == "n\n" {
			assert.Equal(t, cmdutil.ExitFailure, code)
			assert.Equal(t, 1, fx.Count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'open'"), "declined: nothing done")
		} else {
			assert.Equal(t, cmdutil.ExitOK, code, errOut.String())
			assert.Equal(t, 1, fx.Count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'accepted'"))
		}
	}
}

func TestQuarantineAndAuditHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"quarantine", "--help"}, {"quarantine", "list", "--help"}, {"quarantine", "show", "--help"},
		{"quarantine", "reject", "--help"}, {"quarantine", "accept-as-new", "--help"}, {"quarantine", "export", "--help"},
		{"audit", "--help"}, {"audit", "list", "--help"}, {"audit", "verify", "--help"},
	} {
		code, out, _ := runQ(t, "", args...)
		require.Equal(t, cmdutil.ExitOK, code)
		assert.Contains(t, out, "Examples:", args)
		assert.Contains(t, out, "Exit codes:", args)
	}
}

// TestOutputNeverDrivesTheTerminal: a payload may hold C1 control characters
// (RFC 8785 leaves them raw) and a record may be shown in a table or as JSON;
// neither reaches the terminal raw.
func TestOutputNeverDrivesTheTerminal(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	ctx := context.Background()
	cmd := func(memo string) idem.Command {
		return idem.Command{Identity: idem.Identity{TenantID: "t", OperationID: "csi"}, Class: "demo.transfer",
			Payload: []byte(`{"from":"a","to":"b","amount":1,"currency":"EUR","memo":"` + memo + `"}`)}
	}
	_, err := idem.Execute(ctx, pool, cmd("ok"))
	require.NoError(t, err)
	res, err := idem.Execute(ctx, pool, cmd("\u009b2J\u202egnp"))
	require.NoError(t, err)
	require.Equal(t, idem.Conflict, res.Outcome)
	for _, format := range []string{"table", "json"} {
		code, out, _ := runQ(t, dsn, "quarantine", "show", strconv.FormatInt(res.QuarantineID, 10), "-o", format)
		require.Equal(t, cmdutil.ExitOK, code)
		assert.NotContains(t, out, "\u009b", format)
		assert.NotContains(t, out, "\u202e", format)
		if format == "json" {
			assert.True(t, json.Valid([]byte(out)), "still JSON: %s", out)
			assert.Contains(t, out, `\u009b2J\u202egnp`)
		}
	}
}
