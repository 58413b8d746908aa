package attack_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
)

// Four eyes: the one internal step that stamps an approval is granted to
// nobody; no user stamps a plan through it.
func TestFourEyesStepIsInternal(t *testing.T) {
	t.Parallel()
	w := setup(t)
	before := w.snapshot()
	forge := `SELECT idem.four_eyes_approve('idem.horizon_plan', '{"id":1,"state":"planned","planned_person":"x"}',
		'purge plan', 'alice', 'horizon.approve', '{}', ARRAY['IX302', 'IX303'])`
	for name, pool := range map[string]*pgxpool.Pool{"app": w.app, "operator": w.operator, "auditor": w.auditor} {
		_, err := pool.Exec(w.ctx, forge)
		assert.Equal(t, "42501", code(err), name)
	}
	assert.Equal(t, before, w.snapshot())
}
