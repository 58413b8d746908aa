package attack_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/dbtest"
)

var sqlBlockRE = regexp.MustCompile("(?s)```sql\n(.*?)```")

// readmeBlock returns the SQL contract's example (docs/sql-contract.md) that starts with first.
func readmeBlock(t *testing.T, first string) string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/sql-contract.md")
	require.NoError(t, err)
	for _, m := range sqlBlockRE.FindAllStringSubmatch(string(raw), -1) {
		if strings.HasPrefix(m[1], first) {
			return m[1]
		}
	}
	t.Fatalf("docs/sql-contract.md has no SQL example starting with %q", first)
	return ""
}

// TestREADMEContractRunsAsTheAppRole: the SQL contract's examples run as
// written: a class registered the way the README shows, and idem.execute
// called with a login granted idem_app alone.
func TestREADMEContractRunsAsTheAppRole(t *testing.T) {
	t.Parallel()
	// A role of the cluster's, renamed per test and dropped after the
	// database (cleanups run last first).
	owner := fmt.Sprintf("idemctl_t_readme_%d", os.Getpid())
	t.Cleanup(func() { dbtest.Admin(t, dbtest.AdminURL(), "DROP ROLE IF EXISTS "+owner) })
	w := setup(t)
	register := strings.ReplaceAll(readmeBlock(t, "CREATE ROLE payments_owner"), "payments_owner", owner)
	dbtest.Admin(t, w.dsn, register)

	call := readmeBlock(t, "-- as a login granted idem_app")
	for _, want := range []string{"applied", "already_applied"} {
		var outcome string
		var qid *int64
		require.NoError(t, w.app.QueryRow(context.Background(), strings.TrimSuffix(strings.TrimSpace(call), ";")).
			Scan(&outcome, new([]byte), &qid))
		assert.Equal(t, want, outcome)
		assert.Nil(t, qid)
	}
	var n int
	require.NoError(t, w.operator.QueryRow(context.Background(),
		"SELECT count(*) FROM idem.op_class WHERE name = 'payments.charge' AND effect IS NOT NULL").Scan(&n))
	assert.Equal(t, 1, n, "the README's registration is accepted by idem.register_class")
}
