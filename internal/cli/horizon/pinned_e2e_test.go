package horizon_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// A purge plan whose pins include an identity with no body left (purged
// before; a quarantine record holds its tombstone): the plan says how many
// of its pins keep a body and how many are a tombstone only, so that
// candidates (bodies) and the pins that keep a body add up to the bodies in
// its range.
func TestPurgePlanPinsAddUpToTheBodiesInRange(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 2)
	dbtest.RegisterAppClass(t, dsn, "proj.view", "horizon")
	dbtest.Seed(t, dsn, "proj.view", "t1", "op-", 4, 10*24*time.Hour, time.Hour)
	// op-1's body purged earlier; a retry with another payload is then a
	// conflict held on its tombstone. op-2 has a conflict held on its body.
	dbtest.Admin(t, dsn, "DELETE FROM idem.inbox_body WHERE operation_id = 'op-1'")
	app, err := pgxpool.New(t.Context(), dbtest.As(dsn, dbtest.App))
	require.NoError(t, err)
	defer app.Close()
	for _, op := range []string{"op-1", "op-2"} {
		res, err := idem.ExecuteFunc(context.Background(), app, idem.Command{Identity: idem.Identity{TenantID: "t1", OperationID: op},
			Class: "proj.view", Payload: []byte(`{"n":"other"}`)}, func(context.Context, pgx.Tx) (json.RawMessage, error) { return json.RawMessage(`{}`), nil })
		require.NoError(t, err)
		require.Equal(t, idem.Conflict, res.Outcome, op)
	}
	code, out, errOut := runQ(t, dsn, "horizon", "plan", "--class", "proj.view", "--before", "5d", "--accept-unbounded-horizon",
		"-o", "json", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	var p horizon.Plan
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	var bodies int64
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM idem.inbox_body WHERE op_class = 'proj.view'").Scan(&bodies))
	assert.EqualValues(t, 2, p.Pinned, "both conflicts pin their identities")
	assert.EqualValues(t, 1, p.PinnedWithoutBody, "op-1 is a tombstone only")
	assert.Equal(t, bodies, p.Candidates+p.Pinned-p.PinnedWithoutBody, "candidates and the pins that keep a body add up to the bodies in range")

	code, out, errOut = runQ(t, dsn, "horizon", "status", "1", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	flat := strings.Join(strings.Fields(out), " ")
	assert.Contains(t, flat, "2 bodies it removes (not pinned, not held by quarantine evidence)")
	assert.Contains(t, flat, "2 identities (held by quarantine: 2); 1 of them with a body it keeps, 1 a tombstone only (no body left)")
}
