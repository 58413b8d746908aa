package reconcile_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/reconcile"
)

// Exit 3 with the groups when retries with new ids are there, 0 when the
// class that holds them is left out; an auditor can run it.
func TestSuspectsCommand(t *testing.T) {
	t.Parallel()
	_, dsn := dbtest.NewPool(t, 1)
	dbtest.RegisterAppClass(t, dsn, "pay.charge", "forever")
	dbtest.Seed(t, dsn, "pay.charge", "acme", "a-", 5, time.Hour, time.Second)
	dbtest.Seed(t, dsn, "pay.charge", "acme", "retry-", 2, time.Hour, time.Second)
	auditor := dbtest.As(dsn, dbtest.Auditor)

	code, out, stderr := run(t, auditor, "", "suspects", "-o", "json")
	require.Equal(t, cmdutil.ExitConflict, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	var g reconcile.SuspectGroup
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &g))
	assert.Equal(t, "pay.charge", g.Class)
	require.Len(t, g.Operations, 2)

	code, out, stderr = run(t, auditor, "", "suspects", "--exclude-class", "pay.charge", "-o", "table")
	assert.Equal(t, cmdutil.ExitOK, code, stderr)
	assert.Empty(t, out)
	assert.Contains(t, stderr, "0 group(s)")

	// Declared once by an operator (a reason required), the class is left
	// out of every later run unless named; an auditor cannot declare it.
	operator := dbtest.As(dsn, dbtest.Operator)
	code, _, stderr = run(t, operator, "", "class", "set", "pay.charge", "--payloads-repeat", "yes")
	assert.Equal(t, cmdutil.ExitInvalid, code, stderr)
	assert.Contains(t, stderr, "reason")
	code, _, stderr = run(t, operator, "", "class", "set", "pay.charge", "--payloads-repeat", "maybe", "--reason", "x")
	assert.Equal(t, cmdutil.ExitUsage, code, stderr)
	code, _, stderr = run(t, auditor, "", "class", "set", "pay.charge", "--payloads-repeat", "yes", "--reason", "x")
	assert.NotEqual(t, cmdutil.ExitOK, code, stderr)
	code, out, stderr = run(t, operator, "", "class", "set", "pay.charge", "--payloads-repeat", "yes", "--reason", "fixed daily job (OPS-12)")
	require.Equal(t, cmdutil.ExitOK, code, stderr)
	assert.Contains(t, out, `"payloads_repeat":true`)
	code, _, stderr = run(t, auditor, "", "suspects")
	assert.Equal(t, cmdutil.ExitOK, code, stderr)
	code, _, stderr = run(t, auditor, "", "suspects", "--class", "pay.charge")
	assert.Equal(t, cmdutil.ExitConflict, code, stderr)
}
