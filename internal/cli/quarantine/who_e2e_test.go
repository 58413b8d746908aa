package quarantine_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// A quarantine decision names who decided as the person with the login, in
// the list, the record, the refusal of a second decision and the history.
func TestQuarantineDecisionShowsPersonAndLogin(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	bob := dbtest.As(fx.DSN, dbtest.Operator2)
	bobWho := "bob (" + string(dbtest.Operator2) + ")"
	q := fmt.Sprint(fx.Conflict(t, "acme", "charge-1", 100, 200))
	code, out, errOut := runQ(t, bob, "quarantine", "reject", q, "--yes", "--reason", "tampered", "--operator", "root", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "rejected by "+bobWho)

	code, out, _ = runQ(t, fx.DSN, "quarantine", "list", "--status", "all", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "DECIDED BY")
	assert.Contains(t, out, bobWho)
	code, out, _ = runQ(t, fx.DSN, "quarantine", "list", "--status", "all", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, `"decided_person":"bob","decided_db_user":"`+string(dbtest.Operator2)+`"`)
	code, out, _ = runQ(t, fx.DSN, "quarantine", "show", q, "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "rejected by "+bobWho)
	assert.Contains(t, out, "(operator root)")
	code, _, errOut = runQ(t, fx.DSN, "quarantine", "reject", q, "--yes", "--reason", "again", "--operator", "root")
	assert.Equal(t, cmdutil.ExitInvalid, code)
	assert.Contains(t, errOut, "already rejected by "+bobWho)
	code, out, _ = runQ(t, fx.DSN, "inspect", "--tenant", "acme", "--op", "charge-1", "--history", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "rejected by "+bobWho+" (operator root)")
}
