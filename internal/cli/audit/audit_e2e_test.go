package audit_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

func TestAuditCommands(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	auditor := dbtest.As(dsn, dbtest.Auditor) // audit list and verify need nothing more
	ctx := context.Background()
	// The installation's own rows (class registrations, persons) come first.
	var base int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT last_id FROM idem.audit_head").Scan(&base))
	require.Positive(t, base)
	code, out, _ := runQ(t, auditor, "audit", "verify", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, fmt.Sprintf("audit chain intact: %d rows", base))

	// An operator tool's reports (a resolve run's steps) are the rows anyone
	// may append; the operator's own login appends them.
	var last audit.Record
	for i := 0; i < 4; i++ {
		var err error
		last, err = audit.Append(ctx, pool, audit.Entry{Actor: "alice", Action: "resolve.step", Target: fmt.Sprintf("t:%d", i)})
		require.NoError(t, err)
	}
	require.Equal(t, base+4, last.ID)
	// A state-changing action is written only by the SQL function that does it.
	_, err := audit.Append(ctx, pool, audit.Entry{Actor: "alice", Action: "quarantine.reject", Target: "quarantine:1"})
	require.ErrorIs(t, err, audit.ErrReservedAction)

	code, out, _ = runQ(t, auditor, "audit", "list", "--action", "resolve", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	rows := jsonLines(t, out)
	require.Len(t, rows, 4)
	for _, k := range []string{"id", "at", "actor", "db_user", "action", "target", "details", "prev_hash", "hash"} {
		assert.Contains(t, rows[0], k)
	}
	assert.Equal(t, float64(last.ID), rows[0]["id"], "newest first")
	assert.Equal(t, string(dbtest.Operator), rows[0]["db_user"], "the login that appended it")
	// --actor matches who the ACTOR column shows (the person or the login),
	// whatever --operator label the row carries; --label matches the label.
	_, err = audit.Append(ctx, pool, audit.Entry{Actor: "nightly", Action: "resolve.run", Target: "batch:1"})
	require.NoError(t, err)
	for _, args := range [][]string{{"--actor", dbtest.PersonOperator}, {"--actor", string(dbtest.Operator)}} {
		code, out, _ = runQ(t, auditor, append([]string{"audit", "list", "--action", "resolve", "-o", "table"}, args...)...)
		require.Equal(t, cmdutil.ExitOK, code)
		assert.Equal(t, 5, strings.Count(out, dbtest.PersonOperator+" ("+string(dbtest.Operator)+")"), "%v: %s", args, out)
		assert.Contains(t, out, "nightly")
	}
	code, out, _ = runQ(t, auditor, "audit", "list", "--action", "resolve", "--label", "nightly", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	require.Len(t, jsonLines(t, out), 1)
	code, out, _ = runQ(t, auditor, "audit", "list", "--action", "resolve", "--actor", "nightly", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Empty(t, jsonLines(t, out), "a label is not who did it")
	last, err = audit.Append(ctx, pool, audit.Entry{Actor: "alice", Action: "resolve.step", Target: "t:4"})
	require.NoError(t, err)
	base += 2 // the two rows just appended

	code, out, errOut := runQ(t, auditor, "audit", "list", "--limit", "2", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "resolve.step")
	assert.Contains(t, errOut, fmt.Sprintf("--after %d", base+3))

	anchor := audit.Anchor{ID: last.ID, Hash: last.Hash}.String()
	code, out, _ = runQ(t, auditor, "audit", "verify", "-o", "table", "--anchor", anchor)
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, fmt.Sprintf("audit chain intact: %d rows, compared with ", base+4))
	assert.Contains(t, out, "1 row(s) given with --anchor")
	assert.Contains(t, out, "anchor: "+anchor)

	// A row changed behind the log's back: a superuser with triggers disabled.
	tampered := base + 2
	dbtest.Admin(t, dsn, fmt.Sprintf("SET session_replication_role = replica; UPDATE idem.audit SET actor = 'mallory' WHERE id = %d", tampered))

	code, _, errOut = runQ(t, auditor, "audit", "verify", "-o", "table")
	assert.Equal(t, cmdutil.ExitInvalid, code, "a broken chain is not an unreachable database")
	assert.Contains(t, errOut, fmt.Sprintf("audit chain broken at row %d: ", tampered))
	code, out, _ = runQ(t, auditor, "audit", "verify", "-o", "json")
	assert.Equal(t, cmdutil.ExitInvalid, code)
	rows = jsonLines(t, out)
	require.Len(t, rows, 1)
	assert.Equal(t, false, rows[0]["intact"])
	assert.Equal(t, float64(tampered), rows[0]["broken_at"])
}
