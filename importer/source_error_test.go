package importer_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/importer"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// A store that refuses its own login halfway through the read (42501 from
// the source, during the plan's COPY) is named as the source's error, never
// as "this login is not an operator".
func TestImportSourcePermissionDeniedNamesTheSource(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rocketSetup(t, f)
	fillRocket(t, f.dsn, "key-", 40, 10*24*time.Hour, time.Hour)
	dbtest.Admin(t, f.dsn, `
		CREATE FUNCTION rocket.guard(id bigint) RETURNS bigint LANGUAGE plpgsql AS $$
		BEGIN
		    IF id > 25 THEN
		        RAISE EXCEPTION 'permission denied for table ledger' USING ERRCODE = '42501';
		    END IF;
		    RETURN id;
		END $$;
		GRANT USAGE ON SCHEMA rocket TO idemctl_test_nobody;`)
	src := importer.PostgresSource{DSN: dbtest.SourceDSN(f.dsn), PasswordEnv: dbtest.SourcePasswordEnv,
		Query: rocketQuery + " WHERE rocket.guard(id) = id"}
	_, err := importer.Plan(f.ctx, f.alice, src.Opener(), importer.PlanOptions{Class: rideCharge, Correction: ridesLedger,
		Operator: "alice", Reason: "adopt", BatchSize: 8}, importer.Sinks{})
	require.Error(t, err)
	assert.NotErrorIs(t, err, governance.ErrNotOperator)
	var se *importer.SourceError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Contains(t, err.Error(), "the source postgres ")
	assert.Contains(t, err.Error(), "permission denied for table ledger")
	assert.Equal(t, 0, countIn(t, f, "SELECT count(*) FROM idem.entry_plan"), "no plan stored")
}
