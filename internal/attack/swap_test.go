package attack_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
)

// The purge swap's marker (idem.body_swap_xid) decides whether a replay that
// finds no body may answer "purged": reset by hand, it would let a snapshot
// older than a swap answer "purged" for a body that was kept. No user role
// moves it; operators and auditors (resolve's lookups) may ask whether their
// snapshot predates the last swap, a service only through the executor.
func TestSwapMarkerCannotBeMoved(t *testing.T) {
	t.Parallel()
	w := setup(t)
	for name, conn := range map[string]*pgxpool.Pool{"app": w.app, "operator": w.operator, "auditor": w.auditor} {
		for _, sql := range []string{
			"SELECT setval('idem.body_swap_xid', 0)",
			"SELECT nextval('idem.body_swap_xid')",
			"ALTER SEQUENCE idem.body_swap_xid RESTART",
		} {
			_, err := conn.Exec(w.ctx, sql)
			assert.Equal(t, "42501", code(err), "%s: %s", name, sql)
		}
		if name == "app" {
			continue
		}
		var stale bool
		assert.NoError(t, conn.QueryRow(w.ctx, "SELECT idem.snapshot_predates_swap()").Scan(&stale), name)
		assert.False(t, stale, name)
	}
}
