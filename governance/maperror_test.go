package governance_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// Only PostgreSQL's refusal of an idem object to a login not granted it
// says "not an operator"; another 42501 says what it is.
func TestMapErrorNotOperatorOnlyForAnObjectNotGranted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		msg         string
		notOperator bool
	}{
		{"permission denied for function entry_plan_create", true},
		{"permission denied for schema idem", true},
		{"permission denied for table op_class", true},
		{"permission denied to set parameter \"jit\"", false},
		{"must be owner of table identity", false},
		{"permission denied for schema rocket", false},
		{"login alice does not hold the operator role: it cannot run a purge", false},
	} {
		err := governance.MapError(fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "42501", Message: tc.msg}))
		assert.Equal(t, tc.notOperator, errors.Is(err, governance.ErrNotOperator), tc.msg)
		assert.Contains(t, err.Error(), tc.msg)
	}
}

// A login without the operator role, for real: entry_plan_create is not
// granted to a service's login.
func TestMapErrorAServiceLoginIsNotAnOperator(t *testing.T) {
	t.Parallel()
	dsn := dbtest.NewDatabase(t)
	app := dbtest.PoolAs(t, dsn, dbtest.App, 1)
	_, err := app.Exec(context.Background(), "SELECT idem.entry_plan_abort(1, 'x', 'y')")
	assert.ErrorIs(t, governance.MapError(err), governance.ErrNotOperator)
}
