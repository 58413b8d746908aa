package record_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/clitest"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// A record of an identity the inbox holds with another payload: the
// approval's question names it (not entered, quarantined at the run) and
// leaves its amount out of what it records; the run quarantines the
// conflict with both sides (outcome "quarantined", not "exists"), and the
// amount the question said is what entered.
func TestRecordOfAnIdentityHeldWithAnotherPayloadIsNamedAndQuarantined(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	bob := dbtest.As(dsn, dbtest.Operator2)
	app, err := pgxpool.New(t.Context(), dbtest.As(dsn, dbtest.App))
	require.NoError(t, err)
	defer app.Close()
	code, _, errOut := runQ(t, dsn, "class", "set", "demo.transfer", "--money", "/amount,/currency,minor", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	res, err := idem.Execute(context.Background(), app, idem.Command{Identity: idem.Identity{TenantID: "t1", OperationID: "ext-1"},
		Class: "demo.transfer", Payload: []byte(`{"to":"bob","from":"alice","amount":4100,"currency":"EUR"}`)})
	require.NoError(t, err)
	require.Equal(t, idem.Applied, res.Outcome)
	file := filepath.Join(t.TempDir(), "charges.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(
		`{"tenant_id":"t1","operation_id":"ext-1","class":"demo.transfer","payload":{"to":"bob","from":"alice","amount":5000,"currency":"EUR"},"response":{"status":"charged"},"evidence":"psp ch_1"}`+"\n"+
			`{"tenant_id":"t1","operation_id":"ext-2","class":"demo.transfer","payload":{"to":"bob","from":"alice","amount":100,"currency":"EUR"},"response":{"status":"charged"},"evidence":"psp ch_2"}`+"\n"), 0o644))
	code, _, errOut = runQ(t, dsn, "record", "plan", "--file", file, "--reason", "INC-9", "--contract", "PSP-7",
		"--correction", "LC-12 by finance", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	m := regexp.MustCompile(`idemctl record approve (\d+)`).FindStringSubmatch(errOut)
	require.Len(t, m, 2, errOut)
	id := m[1]

	code, out, errOut := clitest.RunTTY(t, bob, "y\n", "record", "approve", id, "--operator", "bob", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut+out)
	assert.Contains(t, errOut, "Approve entry plan "+id+": 1 identit(ies) enter without their effect, recording EUR 1.00 over 1 record; "+
		"already in the inbox, not entered: t1/ext-1 (another payload: quarantined at the run)?")
	assert.Contains(t, errOut, "held: another payload: quarantined at the run", "the plan's table names the held identity")

	code, out, errOut = runQ(t, dsn, "record", "run", id, "--operator", "alice", "-o", "table")
	require.Equal(t, cmdutil.ExitConflict, code, "a run that quarantined a row: %s", errOut)
	assert.Regexp(t, `ext-1 .*quarantined`, out)
	assert.Contains(t, out, "1 (1 not entered: left alone, quarantined or refused)")
	var q struct {
		stored, incoming string
		transport        string
	}
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT stored_payload, incoming_payload, incoming_transport::text FROM idem.quarantine
		WHERE tenant_id = 't1' AND operation_id = 'ext-1' AND status = 'open'`).Scan(&q.stored, &q.incoming, &q.transport))
	assert.Contains(t, q.stored, `"amount":4100`, "the inbox's side")
	assert.Contains(t, q.incoming, `"amount":5000`, "the record's side")
	assert.Contains(t, q.transport, `"entry_plan": `+id)
	var entered []string
	rows, err := pool.Query(t.Context(), "SELECT operation_id FROM idem.identity WHERE entry_plan = $1", id)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		entered = append(entered, s)
	}
	assert.Equal(t, []string{"ext-2"}, entered, "what entered is what the question said it records (EUR 1.00)")
}
