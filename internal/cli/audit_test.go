package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/internal/dbtest"
)

func TestAuditCommandOptions(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := Test(false)
	f := NewFactory(ios)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Now = func() time.Time { return now }

	var list *AuditListOptions
	require.Equal(t, ExitOK, execSub(t, NewCmdAuditList(f, func(o *AuditListOptions) error { list = o; return nil }),
		"--action", "quarantine", "--actor", "alice", "--target", "quarantine:4", "--since", "1h", "--until", "2026-11-30T11:30:00Z",
		"--limit", "10", "--before", "99"))
	assert.Equal(t, audit.Filter{Action: "quarantine", Actor: "alice", Target: "quarantine:4", Since: now.Add(-time.Hour),
		Until: time.Date(2026, 11, 30, 11, 30, 0, 0, time.UTC), Limit: 10, Before: 99}, list.Filter)

	hash := "sha256:" + strings.Repeat("ab", 32)
	var verify *AuditVerifyOptions
	require.Equal(t, ExitOK, execSub(t, NewCmdAuditVerify(f, func(o *AuditVerifyOptions) error { verify = o; return nil }),
		"--anchor", "3:"+hash, "--anchor", "7:"+hash))
	assert.Equal(t, []audit.Anchor{{ID: 3, Hash: hash}, {ID: 7, Hash: hash}}, verify.Anchors)

	for _, tc := range []struct {
		cmd  *cobra.Command
		args []string
	}{
		{NewCmdAuditList(f, nil), []string{"--limit", "0"}},
		{NewCmdAuditList(f, nil), []string{"--since", "last tuesday"}},
		{NewCmdAuditList(f, nil), []string{"--before", "-1"}},
		{NewCmdAuditList(f, nil), []string{"extra"}},
		{NewCmdAuditVerify(f, nil), []string{"--anchor", "3"}},
		{NewCmdAuditVerify(f, nil), []string{"--anchor", "x:" + hash}},
	} {
		assert.Equal(t, ExitUsage, execSub(t, tc.cmd, tc.args...), "%v", tc.args)
	}
}

func TestAuditCommands(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	ctx := context.Background()
	code, out, _ := runQ(t, dsn, "audit", "verify", "-o", "table")
	require.Equal(t, ExitOK, code)
	assert.Contains(t, out, "audit chain intact: 0 rows")

	var last audit.Record
	for i := 0; i < 4; i++ {
		var err error
		last, err = audit.Append(ctx, pool, audit.Entry{Actor: "alice", Action: "test.step", Target: fmt.Sprintf("t:%d", i)})
		require.NoError(t, err)
	}
	code, out, _ = runQ(t, dsn, "audit", "list", "-o", "json")
	require.Equal(t, ExitOK, code)
	rows := jsonLines(t, out)
	require.Len(t, rows, 4)
	for _, k := range []string{"id", "at", "actor", "db_user", "action", "target", "details", "prev_hash", "hash"} {
		assert.Contains(t, rows[0], k)
	}
	code, out, errOut := runQ(t, dsn, "audit", "list", "--limit", "2", "-o", "table")
	require.Equal(t, ExitOK, code)
	assert.Contains(t, out, "test.step")
	assert.Contains(t, errOut, "--before 3")

	anchor := audit.Anchor{ID: last.ID, Hash: last.Hash}.String()
	code, out, _ = runQ(t, dsn, "audit", "verify", "-o", "table", "--anchor", anchor)
	require.Equal(t, ExitOK, code)
	assert.Contains(t, out, "anchor: "+anchor)

	// A row changed behind the log's back, triggers disabled.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SET LOCAL session_replication_role = replica")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "UPDATE idem.audit SET actor = 'mallory' WHERE id = 2")
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	code, _, errOut = runQ(t, dsn, "audit", "verify", "-o", "table")
	assert.Equal(t, ExitFailure, code)
	assert.Contains(t, errOut, "audit chain broken at row 2: ")
	code, out, _ = runQ(t, dsn, "audit", "verify", "-o", "json")
	assert.Equal(t, ExitFailure, code)
	rows = jsonLines(t, out)
	require.Len(t, rows, 1)
	assert.Equal(t, false, rows[0]["intact"])
	assert.Equal(t, float64(2), rows[0]["broken_at"])
}
