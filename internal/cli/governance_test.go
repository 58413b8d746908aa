package cli

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/dbtest"
)

// accept-as-new of a money class plans instead of running: nothing runs
// until another person approves.
func TestAcceptAsNewOfAMoneyClassPlans(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	dbtest.SeedConflicts(t, dsn, dbtest.ClientBug{Prefix: "m-", N: 1, Change: "amount", Source: "mobile"})
	var id int64
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT id FROM idem.quarantine").Scan(&id))
	code, _, errOut := runQ(t, dsn, "class", "set", "demo.transfer", "--money", "/amount,/currency,minor", "--operator", "alice")
	require.Equal(t, ExitOK, code, errOut)
	code, out, errOut := runQ(t, dsn, "quarantine", "accept-as-new", fmt.Sprint(id), "--new-operation-id", "m-1-rev2",
		"--reason", "corrected", "--yes", "--operator", "alice", "-o", "table")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "money class")
	assert.Contains(t, out, "nothing ran")
	assert.Contains(t, out, "idemctl quarantine bulk approve 1")
	var status string
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT status FROM idem.quarantine WHERE id = $1", id).Scan(&status))
	assert.Equal(t, "open", status)
}
