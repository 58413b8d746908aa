package reconcile_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// --emit-record writes the missing_in_inbox lines as the input of a record
// plan and records nothing; alice plans it, bob approves, it runs, and a
// later retry of each operation is already_applied with no effect run.
func TestReconcileEmitRecordThenRecordPlan(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	bob := dbtest.As(dsn, dbtest.Operator2)
	recApply(t, dsn, map[string]int{"c-1": 100})
	dir := t.TempDir()
	report := recFile(t, dir, "psp.csv", "merchant,reference,psp_ref,payer,payee,amount,currency",
		"acme,c-1,ch_1,alice,bob,1.00,eur",
		"acme,x-1,ch_2,alice,bob,12.50,eur",
		"acme,x-2,ch_3,alice,bob,1250,jpy")
	profile := recFile(t, dir, "psp.json", `{"reference_column": "psp_ref", "amount_unit": "major"}`)
	out := filepath.Join(dir, "unrecorded.ndjson")
	code, stdout, errOut := run(t, dsn, "", "reconcile", "--class", "demo.transfer", "--report", report,
		"--key", "tenant=merchant,operation_id=reference", "--profile-file", profile,
		"--compare", "/amount=amount,/currency=currency,/from=payer,/to=payee", "--emit-record", out, "-o", "table")
	require.Equal(t, cmdutil.ExitConflict, code, errOut)
	assert.Contains(t, stdout, "Record plan input: "+out+" (2 operations; nothing recorded)")
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM idem.identity").Scan(&n))
	assert.Equal(t, 1, n, "nothing recorded by reconcile")

	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		var l map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		lines = append(lines, l)
	}
	require.Len(t, lines, 2)
	assert.Equal(t, "x-1", lines[0]["operation_id"])
	assert.Equal(t, map[string]any{"amount": 1250.0, "currency": "EUR", "from": "alice", "to": "bob"}, lines[0]["payload"])
	assert.Equal(t, map[string]any{"amount": 1250.0, "currency": "JPY", "from": "alice", "to": "bob"}, lines[1]["payload"])
	ev := lines[0]["evidence"].(string)
	assert.Regexp(t, `^provider report psp\.csv sha256:[0-9a-f]{64} line 3: provider reference ch_2, 1250 EUR \(minor units\)$`, ev)
	assert.Equal(t, "ch_3", lines[1]["response"].(map[string]any)["provider_reference"])

	// The file exists: refused with exit 2 before anything.
	code, _, errOut = run(t, dsn, "", "reconcile", "--class", "demo.transfer", "--report", report,
		"--key", "tenant=merchant,operation_id=reference", "--profile-file", profile,
		"--compare", "/amount=amount,/currency=currency,/from=payer,/to=payee", "--emit-record", out)
	assert.Equal(t, cmdutil.ExitUsage, code)
	assert.Contains(t, errOut, "--overwrite")

	// alice plans, bob approves, it runs: no effect.
	code, _, errOut = run(t, dsn, "", "record", "plan", "--file", out, "--reason", "PSP settled, never recorded",
		"--correction", "LC-12 by finance", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	m := regexp.MustCompile(`idemctl record approve (\d+)`).FindStringSubmatch(errOut)
	require.Len(t, m, 2, errOut)
	code, _, errOut = run(t, bob, "", "record", "approve", m[1], "--operator", "bob", "--yes")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, _, errOut = run(t, dsn, "", "record", "run", m[1], "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM demo.posting WHERE operation_id IN ('x-1', 'x-2')").Scan(&n))
	assert.Zero(t, n, "no effect ran")

	// The service's retry: already_applied, the recorded response, no posting.
	app := dbtest.PoolAs(t, dsn, dbtest.App, 1)
	res, err := idem.Execute(context.Background(), app, idem.Command{Identity: idem.Identity{TenantID: "acme", OperationID: "x-1"},
		Class: "demo.transfer", Payload: []byte(`{"from":"alice","to":"bob","amount":1250,"currency":"EUR"}`)})
	require.NoError(t, err)
	assert.Equal(t, idem.AlreadyApplied, res.Outcome)
	assert.Contains(t, string(res.Response), `"provider_reference": "ch_2"`)
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM demo.posting WHERE operation_id IN ('x-1', 'x-2')").Scan(&n))
	assert.Zero(t, n, "the retry ran no effect")
}
