package reconcile_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// A row of the report whose identity's body was purged is counted matched
// but not compared: the terminal summary says so (count and why), as the
// one-line summary and -o json's not_compared do; the other rows are
// compared as before.
func TestReconcileSummaryNamesRowsNotCompared(t *testing.T) {
	t.Parallel()
	_, dsn := dbtest.NewPool(t, 2)
	recApply(t, dsn, map[string]int{"c-1": 100, "c-2": 200})
	// c-2's body purged (as a purge under a proven horizon leaves it: the
	// identity's tombstone alone).
	dbtest.Admin(t, dsn, "DELETE FROM idem.inbox_body WHERE operation_id = 'c-2'")
	dir := t.TempDir()
	report := recFile(t, dir, "report.csv", "merchant,reference,amount_minor,currency", "acme,c-1,100,EUR", "acme,c-2,999,EUR")
	base := []string{"reconcile", "--class", "demo.transfer", "--key", "tenant=merchant,operation_id=reference",
		"--compare", "/amount=amount_minor,/currency=currency", "--report", report}

	code, out, errOut := run(t, dsn, "", append(base, "-o", "table")...)
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, ": 2 matched (of which 1 not compared: body purged)")
	assert.Contains(t, out, "Not compared: 1 operation counted above (matched or refunded) had their bodies purged")

	code, out, errOut = run(t, dsn, "", append(base, "-o", "json")...)
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	rows := rsvJSON(t, out)
	summary := rows[len(rows)-1]["summary"].(map[string]any)
	assert.EqualValues(t, 1, summary["not_compared"], "the 999 the report says for c-2 was never compared")
}
