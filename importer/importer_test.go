package importer_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/importer"
	"github.com/idemctl/idemctl/internal/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.SetSourcePassword()
	os.Exit(m.Run())
}

type fixture struct {
	ctx             context.Context
	dsn             string
	alice, bob, app *pgxpool.Pool
}

func setup(t *testing.T) *fixture {
	t.Helper()
	dsn := dbtest.NewDatabase(t)
	return &fixture{ctx: context.Background(), dsn: dsn,
		alice: dbtest.PoolAs(t, dsn, dbtest.Operator, 4),
		bob:   dbtest.PoolAs(t, dsn, dbtest.Operator2, 2),
		app:   dbtest.PoolAs(t, dsn, dbtest.App, 2),
	}
}

// rocketRides creates rocket-rides' idempotency_keys (Brandur Leach's
// rocket-rides-atomic) in schema rocket, readable by the source login.
const rocketRides = `
CREATE SCHEMA rocket;
CREATE TABLE rocket.idempotency_keys (
    id              BIGSERIAL   PRIMARY KEY,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    idempotency_key TEXT        NOT NULL CHECK (char_length(idempotency_key) <= 100),
    last_run_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    locked_at       TIMESTAMPTZ DEFAULT now(),
    request_method  TEXT        NOT NULL CHECK (char_length(request_method) <= 10),
    request_params  JSONB       NOT NULL,
    request_path    TEXT        NOT NULL CHECK (char_length(request_path) <= 100),
    response_code   INT         NULL,
    response_body   JSONB       NULL,
    recovery_point  TEXT        NOT NULL CHECK (char_length(recovery_point) <= 50),
    user_id         BIGINT      NOT NULL
);
CREATE UNIQUE INDEX idempotency_keys_user_id_idempotency_key ON rocket.idempotency_keys (user_id, idempotency_key);
GRANT USAGE ON SCHEMA rocket TO idemctl_test_nobody;
GRANT SELECT ON rocket.idempotency_keys TO idemctl_test_nobody;
CREATE TABLE rocket.charge (user_id text, idempotency_key text, amount bigint);
GRANT USAGE ON SCHEMA rocket TO idemctl_test_effects;
GRANT SELECT, INSERT ON rocket.charge TO idemctl_test_effects;`

// rideCharge is the class of rocket-rides' charges once it moved to
// idem.execute: its effect writes a charge row.
const rideCharge = "rides.charge"

// ridesLedger is what an import of rideCharge cites as its --correction:
// who wrote the effects of the operations it imports.
const ridesLedger = "charges written by rocket-rides before the cutover"

func rocketSetup(t *testing.T, f *fixture) {
	dbtest.Admin(t, f.dsn, rocketRides)
	dbtest.RegisterEffect(t, f.dsn, rideCharge, "forever", "ride_charge",
		"INSERT INTO rocket.charge VALUES (t, o, (p->>'amount')::bigint) RETURNING jsonb_build_object('charged', amount)")
}

// rocketQuery is the import's query for rocket-rides: the user is the
// tenant, the response its code and body.
const rocketQuery = `SELECT user_id AS tenant_id, idempotency_key AS operation_id, request_params AS payload,
       CASE WHEN response_code IS NOT NULL THEN jsonb_build_object('code', response_code, 'body', response_body) END AS response,
       created_at, recovery_point AS status, locked_at IS NOT NULL AS locked
FROM rocket.idempotency_keys`

// fillRocket writes n keys spread over from, ending until before now: every tenth is
// abandoned at "started", every tenth+1 still locked at "ride_created",
// the rest finished with a response.
func fillRocket(t *testing.T, dsn, prefix string, n int, from, until time.Duration) {
	dbtest.Admin(t, dsn, `
		INSERT INTO rocket.idempotency_keys (created_at, idempotency_key, last_run_at, locked_at, request_method,
		                                     request_params, request_path, response_code, response_body, recovery_point, user_id)
		SELECT now() - $4::interval - $3::interval * (1 - g::float8 / $2), $1 || g, now(),
		       CASE WHEN g % 10 = 1 THEN now() END, 'POST',
		       jsonb_build_object('amount', 1000 + g, 'currency', 'usd', 'origin_lat', 0.0, 'target_lon', -122.4),
		       '/charges',
		       CASE WHEN g % 10 > 1 THEN 201 END,
		       CASE WHEN g % 10 > 1 THEN jsonb_build_object('id', 'ch_' || g, 'status', 'succeeded') END,
		       CASE g % 10 WHEN 0 THEN 'started' WHEN 1 THEN 'ride_created' ELSE 'finished' END,
		       1 + g % 3
		FROM generate_series(1, $2::int) g`, prefix, n, fmt.Sprintf("%d seconds", int(from.Seconds())),
		fmt.Sprintf("%d seconds", int(until.Seconds())))
}

type rocketKey struct {
	Tenant, Key, Status string
	Locked              bool
	Params, Response    []byte
	CreatedAt           time.Time
}

func rocketKeys(t *testing.T, f *fixture) []rocketKey {
	t.Helper()
	admin := dbtest.PoolAs(t, f.dsn, dbtest.Superuser, 1)
	rows, err := admin.Query(f.ctx, `SELECT user_id::text, idempotency_key, recovery_point, locked_at IS NOT NULL, request_params::text,
		coalesce(jsonb_build_object('code', response_code, 'body', response_body)::text, ''), created_at FROM rocket.idempotency_keys ORDER BY id`)
	require.NoError(t, err)
	var keys []rocketKey
	for rows.Next() {
		var k rocketKey
		require.NoError(t, rows.Scan(&k.Tenant, &k.Key, &k.Status, &k.Locked, &k.Params, &k.Response, &k.CreatedAt))
		keys = append(keys, k)
	}
	require.NoError(t, rows.Err())
	return keys
}

// reserialise is the payload the migrated service sends: the same JSON with
// other key order and spacing.
func reserialise(t *testing.T, raw []byte) []byte {
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	var b bytes.Buffer
	b.WriteString("{ ")
	keys := []string{"target_lon", "origin_lat", "currency", "amount"}
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" ,\n  ")
		}
		v, _ := json.Marshal(m[k])
		fmt.Fprintf(&b, "%q :  %s", k, v)
	}
	b.WriteString(" }")
	return b.Bytes()
}

// postings counts the charges the effect wrote.
func postings(t *testing.T, f *fixture) int {
	var n int
	admin := dbtest.PoolAs(t, f.dsn, dbtest.Superuser, 1)
	require.NoError(t, admin.QueryRow(f.ctx, "SELECT count(*) FROM rocket.charge").Scan(&n))
	admin.Close()
	return n
}

// The "Done when": a rocket-rides store over ninety days, planned
// by alice, approved by bob, run; every finished key retried with the
// payload the migrated service sends is already_applied with its original
// response and no effect run; another amount is a conflict; every
// unfinished or locked key is in the ambiguous list; the imported rows keep
// their ages; a rerun with --since imports only the rows added since.
func TestImportRocketRides(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rocketSetup(t, f)
	fillRocket(t, f.dsn, "key-", 300, 90*24*time.Hour, time.Hour)
	keys := rocketKeys(t, f)

	// Meanwhile the new service already executed two keys itself: one with
	// the same request (skipped), one with another (quarantined, both kept).
	same, other := keys[2], keys[3]
	res, err := idem.Execute(f.ctx, f.app, idem.Command{Identity: idem.Identity{TenantID: same.Tenant, OperationID: same.Key},
		Class: rideCharge, Payload: same.Params})
	require.NoError(t, err)
	require.Equal(t, idem.Applied, res.Outcome)
	res, err = idem.Execute(f.ctx, f.app, idem.Command{Identity: idem.Identity{TenantID: other.Tenant, OperationID: other.Key},
		Class: rideCharge, Payload: []byte(`{"amount":1,"currency":"usd"}`)})
	require.NoError(t, err)
	require.Equal(t, idem.Applied, res.Outcome)
	posted := postings(t, f)

	src := importer.PostgresSource{DSN: dbtest.SourceDSN(f.dsn), Query: rocketQuery, PasswordEnv: dbtest.SourcePasswordEnv}
	var ambiguous, invalid bytes.Buffer
	plan := func(since *importer.Cursor) importer.Result {
		t.Helper()
		ambiguous.Reset()
		r, err := importer.Plan(f.ctx, f.alice, src.Opener(), importer.PlanOptions{Class: rideCharge, Correction: ridesLedger, Operator: "alice",
			Reason: "adopt rocket-rides (MIG-1)", Since: since, SinceOverlap: importer.DefaultSinceOverlap, BatchSize: 64}, importer.Sinks{Ambiguous: &ambiguous, Invalid: &invalid})
		require.NoError(t, err)
		return r
	}
	reopen := func(ctx context.Context, since *importer.Cursor, ordered bool) (importer.Source, error) {
		s := src
		s.Since, s.Unordered = since, !ordered
		return s.Open(ctx)
	}
	r := plan(nil)
	assert.Equal(t, importer.Counts{Read: 300, ToImport: 240, Ambiguous: 60}, r.Counts)
	assert.Empty(t, invalid.String())
	assert.Equal(t, "planned", r.Plan.State)
	assert.Equal(t, 240, r.Plan.Items)
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, r.Digest)
	assert.Equal(t, r.Digest, r.Plan.SourceDigest)
	require.NotNil(t, r.Cursor)
	assert.Equal(t, "key-300", r.Cursor.OperationID)

	// Every unfinished or locked key is in the ambiguous list, in resolve's format.
	listed := map[string]bool{}
	sc := bufio.NewScanner(&ambiguous)
	for sc.Scan() {
		var l struct {
			Tenant      string          `json:"tenant"`
			OperationID string          `json:"operation_id"`
			Class       string          `json:"class"`
			Payload     json.RawMessage `json:"payload"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		assert.Equal(t, rideCharge, l.Class)
		assert.NotEmpty(t, l.Payload)
		listed[l.Tenant+"/"+l.OperationID] = true
	}
	for _, k := range keys {
		assert.Equal(t, k.Status != "finished" || k.Locked, listed[k.Tenant+"/"+k.Key], k.Key)
	}

	// The review of an import plan (record list/show, the console) is its
	// digest, counts and sample: a store's history is not loaded item by item.
	review, err := governance.ShowEntry(f.ctx, f.bob, r.Plan.ID)
	require.NoError(t, err)
	assert.Equal(t, governance.EntryImport, review.Kind)
	assert.Equal(t, r.Plan.Items, review.Items)
	assert.Empty(t, review.Entries)

	_, err = governance.RunEntry(f.ctx, f.alice, r.Plan.ID, "alice")
	assert.ErrorIs(t, err, governance.ErrState, "nothing runs before the approval")
	_, err = importer.Approve(f.ctx, f.alice, r.Plan.ID, "alice", reopen)
	assert.ErrorIs(t, err, governance.ErrSamePerson)
	_, err = importer.Approve(f.ctx, f.bob, r.Plan.ID, "bob", reopen)
	require.NoError(t, err)
	done, err := importer.Run(f.ctx, f.alice, r.Plan.ID, "alice", reopen)
	require.NoError(t, err)
	assert.Equal(t, "done", done.State)
	outcomes, err := importer.Outcomes(f.ctx, f.alice, r.Plan.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"entered": 238, "skipped": 1, "quarantined": 1}, outcomes)
	assert.Equal(t, posted, postings(t, f), "the import ran no effect")
	var quarantined int
	require.NoError(t, f.alice.QueryRow(f.ctx, `SELECT count(*) FROM idem.quarantine WHERE operation_id = $1
		AND stored_payload = '{"amount":1,"currency":"usd"}' AND incoming_payload LIKE '{"amount":1004,%'`, other.Key).Scan(&quarantined))
	assert.Equal(t, 1, quarantined, "another payload is quarantined with both sides; nothing is overwritten")

	for _, k := range keys {
		if k.Status != "finished" || k.Locked || k.Key == other.Key {
			continue
		}
		res, err := idem.Execute(f.ctx, f.app, idem.Command{Identity: idem.Identity{TenantID: k.Tenant, OperationID: k.Key},
			Class: rideCharge, Payload: reserialise(t, k.Params)})
		require.NoError(t, err, k.Key)
		require.Equal(t, idem.AlreadyApplied, res.Outcome, k.Key)
		if k.Key != same.Key {
			require.JSONEq(t, string(k.Response), string(res.Response), k.Key)
			var age time.Time
			require.NoError(t, f.alice.QueryRow(f.ctx, "SELECT created_at FROM idem.identity WHERE tenant_id = $1 AND operation_id = $2",
				k.Tenant, k.Key).Scan(&age))
			require.True(t, k.CreatedAt.Equal(age), "%s keeps its age: %s, not %s", k.Key, k.CreatedAt, age)
		}
	}
	assert.Equal(t, posted, postings(t, f), "no retry ran an effect")
	k := keys[4]
	res, err = idem.Execute(f.ctx, f.app, idem.Command{Identity: idem.Identity{TenantID: k.Tenant, OperationID: k.Key},
		Class: rideCharge, Payload: []byte(`{"amount":99999,"currency":"usd","origin_lat":0.0,"target_lon":-122.4}`)})
	require.NoError(t, err)
	assert.Equal(t, idem.Conflict, res.Outcome, "another amount")
	origin, err := governance.Origin(f.ctx, f.alice, k.Tenant, k.Key)
	require.NoError(t, err)
	assert.Contains(t, origin, fmt.Sprintf("imported under entry plan %d: planned by alice", r.Plan.ID))
	var oldest time.Time
	require.NoError(t, f.alice.QueryRow(f.ctx, "SELECT min(created_at) FROM idem.identity WHERE entry_plan = $1", r.Plan.ID).Scan(&oldest))
	assert.Less(t, oldest, time.Now().Add(-85*24*time.Hour), "ninety days of history keep their ages")

	// The old code keeps writing; the rerun with --since reads what came
	// after, and again the last day before the cursor (the overlap: a row
	// stamped before it that committed late is not lost): 3 finished keys
	// and 1 unfinished of the first import's last day, read again.
	fillRocket(t, f.dsn, "late-", 20, time.Minute, 0)
	again := plan(r.Cursor)
	assert.Equal(t, importer.Counts{Read: 24, ToImport: 19, Ambiguous: 5, Since: r.Cursor.String(),
		ReadFrom: importer.ReadFrom(r.Cursor, importer.DefaultSinceOverlap).String()}, again.Counts)
	// A planned row that changed before the approval: nothing is approved,
	// so nothing can enter.
	dbtest.Admin(t, f.dsn, `UPDATE rocket.idempotency_keys SET response_body = response_body || '{"tampered":true}'
		WHERE id = (SELECT min(id) FROM rocket.idempotency_keys WHERE idempotency_key LIKE 'late-%' AND recovery_point = 'finished' AND locked_at IS NULL)`)
	_, err = importer.Approve(f.ctx, f.bob, again.Plan.ID, "bob", reopen)
	assert.ErrorIs(t, err, governance.ErrRefused)
	assert.ErrorContains(t, err, "differs from the source's")
	_, err = importer.Run(f.ctx, f.alice, again.Plan.ID, "alice", reopen)
	assert.ErrorIs(t, err, governance.ErrState, "an import not approved does not run")
	var entered int
	require.NoError(t, f.alice.QueryRow(f.ctx, "SELECT count(*) FROM idem.identity WHERE entry_plan = $1", again.Plan.ID).Scan(&entered))
	assert.Zero(t, entered, "nothing entered")
	dbtest.Admin(t, f.dsn, `UPDATE rocket.idempotency_keys SET response_body = response_body - 'tampered' WHERE response_body ? 'tampered'`)
	_, err = importer.Approve(f.ctx, f.bob, again.Plan.ID, "bob", reopen)
	require.NoError(t, err)
	// The run enters the stage the approval compared with the source: it
	// does not read the source (one that cannot be read changes nothing).
	_, err = importer.Run(f.ctx, f.alice, again.Plan.ID, "alice", func(context.Context, *importer.Cursor, bool) (importer.Source, error) {
		return nil, errors.New("the run of a staged plan reads no source")
	})
	require.NoError(t, err)
	outcomes, err = importer.Outcomes(f.ctx, f.alice, again.Plan.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"entered": 16, "skipped": 3}, outcomes, "the overlap's keys are in the inbox: skipped, not entered twice")
	_, err = importer.Plan(f.ctx, f.alice, src.Opener(), importer.PlanOptions{Class: rideCharge, Correction: ridesLedger, Operator: "alice",
		Reason: "adopt rocket-rides (MIG-1)", Since: again.Cursor, SinceOverlap: -1}, importer.Sinks{})
	assert.ErrorIs(t, err, importer.ErrNothingToImport, "a rerun imports nothing twice")
}
