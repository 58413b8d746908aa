package attack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/internal/cli"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// idemctl runs the CLI as a user would, against dsn.
func idemctl(t *testing.T, dsn string, args ...string) (int, string, string) {
	t.Helper()
	ios, _, out, errOut := cmdutil.Test(false)
	f := cmdutil.NewFactory(ios)
	defer f.Close()
	code := cli.Run(context.Background(), f, append(args, "--dsn", dsn))
	return code, out.String(), errOut.String()
}

// Finding (trust boundary, round two, 4): the schema owner could move the
// audit head by hand, and a chain rewritten from some row on with its
// hashes recomputed, and its tail cut, verified intact unless the verifier
// passed an anchor by hand. The head now moves only onto the row just
// appended, and audit verify keeps the head it verified in the verifier's
// own file and says what moved since.
func TestAuditHeadAndKeptAnchor(t *testing.T) {
	t.Parallel()
	w := setup(t)
	auditor := dbtest.As(w.dsn, dbtest.Auditor)
	for i := 0; i < 12; i++ {
		_, err := audit.Append(w.ctx, w.operator, audit.Entry{Actor: "alice", Action: "resolve.step", Target: fmt.Sprintf("t:%d", i)})
		require.NoError(t, err)
	}
	// The owner's UPDATE of the head: back, forward, or onto another hash.
	for _, sql := range []string{
		"UPDATE idem.audit_head SET last_id = last_id - 1",
		"UPDATE idem.audit_head SET last_id = last_id + 1",
		"UPDATE idem.audit_head SET last_hash = (SELECT hash FROM idem.audit WHERE id = 1)",
	} {
		assert.Equal(t, "IX112", code(dbtest.Owner(w.dsn, sql)), sql)
	}

	file := filepath.Join(t.TempDir(), "anchors.json")
	c, out, errOut := idemctl(t, auditor, "audit", "verify", "-o", "json", "--anchor-file", file)
	require.Equal(t, cmdutil.ExitOK, c, out+errOut)
	assert.Contains(t, errOut, "first run")
	st, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	var head int64
	require.NoError(t, w.auditor.QueryRow(w.ctx, "SELECT last_id FROM idem.audit_head").Scan(&head))
	require.Greater(t, head, int64(12))

	// A superuser, triggers off, rewrites the chain from row 10 on with the
	// hashes recomputed, cuts its last two rows and moves the head: the
	// chain alone verifies.
	rewriteFrom(t, w, 10, head-2)
	c, _, _ = idemctl(t, auditor, "audit", "verify", "-o", "json", "--anchor-file", filepath.Join(t.TempDir(), "fresh.json"))
	require.Equal(t, cmdutil.ExitOK, c, "without an anchor the rewrite is invisible")

	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	c, _, errOut = idemctl(t, auditor, "audit", "verify", "-o", "json", "--anchor-file", file)
	assert.Equal(t, cmdutil.ExitInvalid, c)
	assert.Contains(t, errOut, fmt.Sprintf("rows %d-%d are missing and the head is behind the anchor", head-1, head))
	again, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, string(raw), string(again), "a broken chain never moves the anchor")

	// A corrupt or open anchor file is an error (exit 2), never replaced.
	require.NoError(t, os.WriteFile(file, []byte("{not json"), 0o600))
	c, _, errOut = idemctl(t, auditor, "audit", "verify", "--anchor-file", file)
	assert.Equal(t, cmdutil.ExitUsage, c, errOut)
	assert.Contains(t, errOut, "corrupt")
	again, err = os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "{not json", string(again))
	require.NoError(t, os.WriteFile(file, raw, 0o600))
	require.NoError(t, os.Chmod(file, 0o644))
	c, _, errOut = idemctl(t, auditor, "audit", "verify", "--anchor-file", file)
	assert.Equal(t, cmdutil.ExitUsage, c, errOut)
	assert.Contains(t, errOut, "others may read or change it")
}

// rewriteFrom recomputes, as a superuser with the triggers off, every row
// from row from on with another actor and the hashes chained again, deletes
// the rows after last and points the head at last.
func rewriteFrom(t *testing.T, w *world, from, last int64) {
	t.Helper()
	conn, err := pgx.Connect(w.ctx, dbtest.As(w.dsn, dbtest.Superuser))
	require.NoError(t, err)
	defer conn.Close(w.ctx)
	_, err = conn.Exec(w.ctx, "SET session_replication_role = replica")
	require.NoError(t, err)
	recs, err := audit.List(w.ctx, conn, audit.Filter{Limit: audit.MaxLimit})
	require.NoError(t, err)
	byID := map[int64]audit.Record{}
	for _, r := range recs {
		byID[r.ID] = r
	}
	prev := byID[from-1].Hash
	for id := from; id <= last; id++ {
		r := byID[id]
		r.Actor, r.PrevHash = "mallory", prev
		r.Hash = audit.RowHash(r)
		_, err := conn.Exec(w.ctx, "UPDATE idem.audit SET actor = $2, prev_hash = $3, hash = $4 WHERE id = $1", id, r.Actor, r.PrevHash, r.Hash)
		require.NoError(t, err)
		prev = r.Hash
	}
	_, err = conn.Exec(w.ctx, "DELETE FROM idem.audit WHERE id > $1", last)
	require.NoError(t, err)
	_, err = conn.Exec(w.ctx, "UPDATE idem.audit_head SET last_id = $1, last_hash = $2", last, prev)
	require.NoError(t, err)
}

// The anchor file names a database by its address and its own identity
// (idem.database_id), so that its entry is that database's. The identity is
// a row whoever controls the database can stamp again: another identity at
// an address that has an entry is compared with that entry (a cut log is no
// first run), and the message says how a database really created again
// there starts afresh (its verifier moves the entry aside); the same
// database rewritten still breaks; an entry an older idemctl kept under the
// address alone is still checked, and a break against it says what it may be.
func TestAuditAnchorNamesTheDatabaseNotOnlyItsAddress(t *testing.T) {
	t.Parallel()
	w := setup(t)
	auditor := dbtest.As(w.dsn, dbtest.Auditor)
	for i := 0; i < 12; i++ {
		_, err := audit.Append(w.ctx, w.operator, audit.Entry{Actor: "alice", Action: "resolve.step", Target: fmt.Sprintf("t:%d", i)})
		require.NoError(t, err)
	}
	file := filepath.Join(t.TempDir(), "anchors.json")
	c, out, errOut := idemctl(t, auditor, "audit", "verify", "-o", "table", "--anchor-file", file)
	require.Equal(t, cmdutil.ExitOK, c, out+errOut)
	assert.Contains(t, out, "compared with no anchor")
	kept := readAnchors(t, file)
	require.Len(t, kept, 1)
	var head int64
	require.NoError(t, w.auditor.QueryRow(w.ctx, "SELECT last_id FROM idem.audit_head").Scan(&head))
	var id1 string
	require.NoError(t, w.auditor.QueryRow(w.ctx, "SELECT idem.database_id()").Scan(&id1))
	for key := range kept {
		assert.Contains(t, key, id1, "the entry names the database")
	}
	// Verified again: the summary says what it compared with, once.
	c, out, errOut = idemctl(t, auditor, "audit", "verify", "-o", "table", "--anchor-file", file)
	require.Equal(t, cmdutil.ExitOK, c, out+errOut)
	assert.Contains(t, out, fmt.Sprintf("compared with row %d as verified on ", head))
	assert.NotContains(t, out+errOut, "0 anchor(s)")
	assert.Contains(t, errOut, fmt.Sprintf("row %d kept in %s", head, file))

	// Another identity at the same address (a database created again, or
	// the same one stamped again) and another chain: compared with the
	// address's entry, not a first run.
	rewriteFrom(t, w, 10, head-2)
	restamp := func(id string) {
		t.Helper()
		require.NoError(t, dbtest.Owner(w.dsn, "UPDATE idem.database_identity SET id = $1", id))
	}
	id2 := strings.Repeat("ab", 16)
	restamp(id2)
	c, out, errOut = idemctl(t, auditor, "audit", "verify", "-o", "table", "--anchor-file", file)
	assert.Equal(t, cmdutil.ExitInvalid, c, "another identity at the address is compared with its entry: %s", out+errOut)
	assert.NotContains(t, errOut, "first run")
	assert.Contains(t, errOut, "its identity was "+id1)
	assert.Contains(t, errOut, "move its entry")
	assert.Len(t, readAnchors(t, file), 1, "nothing kept for the new identity")

	// Its verifier, knowing the database was created again, moves the
	// entry aside: a first run for it.
	aside := filepath.Join(t.TempDir(), "aside.json")
	raw, err := json.Marshal(map[string]any{"version": 1, "databases": map[string]audit.KeptAnchor{}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(aside, raw, 0o600))
	c, out, errOut = idemctl(t, auditor, "audit", "verify", "-o", "table", "--anchor-file", aside)
	assert.Equal(t, cmdutil.ExitOK, c, out+errOut)
	assert.Contains(t, errOut, "first run for ")
	assert.Contains(t, errOut, id2)

	// The same database (its identity) rewritten still breaks.
	restamp(id1[:32])
	c, _, errOut = idemctl(t, auditor, "audit", "verify", "-o", "table", "--anchor-file", file)
	assert.Equal(t, cmdutil.ExitInvalid, c, errOut)
	assert.Contains(t, errOut, fmt.Sprintf("rows %d-%d are missing and the head is behind the anchor", head-1, head))

	// An entry kept by an older idemctl, under the address alone, is used.
	old := filepath.Join(t.TempDir(), "old.json")
	legacy := map[string]audit.KeptAnchor{}
	for key, k := range kept {
		legacy[key[:strings.Index(key, " database ")]] = k
	}
	raw, err = json.Marshal(map[string]any{"version": 1, "databases": legacy})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(old, raw, 0o600))
	c, _, errOut = idemctl(t, auditor, "audit", "verify", "-o", "table", "--anchor-file", old)
	assert.Equal(t, cmdutil.ExitInvalid, c, errOut)
	assert.Contains(t, errOut, "before anchors named the database's identity")
	assert.Contains(t, errOut, "move its entry")
}

// readAnchors returns an anchor file's entries.
func readAnchors(t *testing.T, path string) map[string]audit.KeptAnchor {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var f struct {
		Databases map[string]audit.KeptAnchor `json:"databases"`
	}
	require.NoError(t, json.Unmarshal(raw, &f))
	return f.Databases
}
