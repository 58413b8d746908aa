package imports_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// A hash-only store's row for an identity the inbox holds with another
// request: import run counts it as conflict_hash_only (table and -o json),
// names the row and what the outcome means, and record show lists it with
// its outcome (-o json too), as what happened: nothing entered for it.
func TestImportRunNamesAHashOnlyConflict(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	bob := dbtest.As(dsn, dbtest.Operator2)
	app, err := pgxpool.New(t.Context(), dbtest.As(dsn, dbtest.App))
	require.NoError(t, err)
	defer app.Close()
	_, err = idem.Execute(context.Background(), app, idem.Command{Identity: idem.Identity{TenantID: "t1", OperationID: "k-1"},
		Class: "demo.transfer", Payload: []byte(`{"to":"bob","from":"alice","amount":4100,"currency":"EUR"}`)})
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "store.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(
		`{"tenant_id":"t1","operation_id":"k-1","request_hash":"`+"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"+`","response":{"old":1},"created_at":"2026-11-01T10:00:00Z","status":"finished"}`+"\n"+
			`{"tenant_id":"t1","operation_id":"k-2","request_hash":"`+"cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"+`","response":{"old":2},"created_at":"2026-11-01T11:00:00Z","status":"finished"}`+"\n"), 0o600))
	code, _, errOut := runQ(t, dsn, "import", "plan", "--class", "demo.transfer", "--correction", ledger, "--from-ndjson", file,
		"--ambiguous", filepath.Join(t.TempDir(), "amb.ndjson"), "--reason", "adopt", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	m := regexp.MustCompile(`idemctl import approve (\d+)`).FindStringSubmatch(errOut)
	require.Len(t, m, 2, errOut)
	id := m[1]
	code, _, errOut = run(t, bob, "", "import", "approve", id, "--operator", "bob", "--yes", "--from-ndjson", file)
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, out, errOut := runQ(t, dsn, "import", "run", id, "--operator", "alice", "--from-ndjson", file, "-o", "json")
	require.Equal(t, cmdutil.ExitConflict, code, "a conflict left in the inbox's favour: %s", errOut)
	var ran struct {
		Outcomes map[string]int `json:"outcomes"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &ran), out)
	assert.Equal(t, map[string]int{"entered": 1, "conflict_hash_only": 1}, ran.Outcomes)
	assert.Contains(t, errOut, "outcomes: conflict_hash_only 1, entered 1")
	assert.Contains(t, errOut, "not entered: t1/k-1 (row 1): conflict_hash_only: the inbox holds it with another request than the store's hash")
	assert.Contains(t, errOut, "idemctl record show "+id+" lists the rows that did not enter")

	code, out, errOut = runQ(t, dsn, "record", "show", id, "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	var shown struct {
		Entries []struct {
			OperationID string `json:"operation_id"`
			Outcome     string `json:"outcome"`
		} `json:"entries"`
		NotEntered int `json:"not_entered"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &shown), out)
	assert.Equal(t, 1, shown.NotEntered)
	require.Len(t, shown.Entries, 1)
	assert.Equal(t, "k-1", shown.Entries[0].OperationID)
	assert.Equal(t, "conflict_hash_only", shown.Entries[0].Outcome)
	code, out, errOut = runQ(t, dsn, "record", "show", id, "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "Rows that did not enter (1 of 1):")
	assert.Regexp(t, `k-1\s.*conflict_hash_only`, out)

	var in []string
	rows, err := pool.Query(t.Context(), "SELECT operation_id FROM idem.identity WHERE entry_plan = $1", id)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		in = append(in, s)
	}
	assert.Equal(t, []string{"k-2"}, in, "what the run said entered is what entered")
}
