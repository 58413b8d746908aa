package attack_test

// Attacks on the per-call effect check through plan time. A design that
// folded the check into the plan of the expression that calls the effect
// (decided once a plan, planned again when the effect changes) was built
// and reverted: planning that expression plans the call of the effect
// first, and the planner runs the effect owner's code (an inlined SQL
// body's IMMUTABLE call, a DEFAULT argument) as the schema owner before
// any part of the check. The check must run as a statement of its own
// before the call is planned: these tests hold it to that, on one app
// connection whose plans stay cached.

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/migrations"
)

// appConn is one app connection whose plans stay cached between calls, and
// a call of class on it for a fresh operation id each time.
type appConn struct {
	w    *world
	conn *pgx.Conn
	n    int
}

func newAppConn(t *testing.T, w *world) *appConn {
	t.Helper()
	conn, err := pgx.Connect(w.ctx, dbtest.As(w.dsn, dbtest.App))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(w.ctx) })
	return &appConn{w: w, conn: conn}
}

// call returns the SQLSTATE of a refusal ("" when it ran), the message, and
// the response's ran_as.
func (a *appConn) call(class string) (string, string, string) {
	a.n++
	payload := `{"n":1}`
	var outcome string
	var resp map[string]any
	var qid *int64
	err := a.conn.QueryRow(a.w.ctx, "SELECT outcome, response, quarantine_id FROM idem.execute('t1', $1, $2, $3, $4)",
		fmt.Sprintf("%s-%d", class, a.n), class, payload, hashOf(payload)).Scan(&outcome, &resp, &qid)
	if err != nil {
		return code(err), err.Error(), ""
	}
	s, _ := resp["ran_as"].(string)
	return "", "", s
}

// warm calls class three times on a and requires each to run as owner.
func (a *appConn) warm(t *testing.T, class, owner string) {
	t.Helper()
	for i := 0; i < 3; i++ {
		refused, msg, ranAs := a.call(class)
		require.Equal(t, "", refused, msg)
		require.Equal(t, owner, ranAs)
	}
}

// Plan time: the check and the call are one expression, so planning
// it plans the call of the effect before any part of the check runs. The
// effect's owner replaces it with an inlinable SQL function (SECURITY
// INVOKER, no SET) whose body calls an IMMUTABLE function with no
// arguments: the planner inlines the effect and folds that function, i.e.
// runs it, while planning idem.run_effect's expression inside idem.execute,
// as the schema owner. Here it only says whom it ran as (the app's error
// carries it); the next test makes it write.
func TestAt2EffectCodeRunsAtPlanTimeAsSchemaOwner(t *testing.T) {
	t.Parallel()
	owner := clusterRole(t, "at2plan", "NOLOGIN")
	w := setup(t)
	effectOwner(t, w, owner, "fx.plan")
	a := newAppConn(t, w)
	a.warm(t, "fx.plan", owner)
	dbtest.Admin(t, w.dsn, fmt.Sprintf(`SET ROLE %[1]s;
		CREATE FUNCTION %[1]s.whoami() RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
		BEGIN RAISE EXCEPTION 'planted code ran as %%, it sees %% identities', current_user,
		      (SELECT count(*) FROM idem.identity); END $$;
		CREATE OR REPLACE FUNCTION %[1]s.fx(t text, o text, p jsonb) RETURNS jsonb LANGUAGE sql
		AS $$ SELECT %[1]s.whoami() $$`, owner))
	refused, msg, _ := a.call("fx.plan")
	t.Logf("refusal %s: %s", refused, msg)
	assert.Equal(t, "IX016", refused, "the changed effect is refused before any of its code runs")
	assert.NotContains(t, msg, "ran as "+migrations.DefaultRoles().Owner, "code of the effect's owner ran as the schema owner")
}

// (plan time, persisted): the same plan-time code, made to last. The
// IMMUTABLE function the inlined effect calls PERFORMs a VOLATILE one (a
// SELECT is allowed in a non-volatile function, and what it calls is not
// read-only), which, as the schema owner, replaces idem.effect_recheck by
// one that accepts everything and leaves a SECURITY DEFINER function in
// schema idem that runs any SQL for PUBLIC. The call then returns
// "applied", so the app's transaction commits all of it.
func TestAt2PlanTimeCodeTakesOverTheSchema(t *testing.T) {
	t.Parallel()
	owner := clusterRole(t, "at2take", "NOLOGIN")
	w := setup(t)
	effectOwner(t, w, owner, "fx.take")
	a := newAppConn(t, w)
	a.warm(t, "fx.take", owner)
	dbtest.Admin(t, w.dsn, fmt.Sprintf(`SET ROLE %[1]s;
		CREATE FUNCTION %[1]s.steal() RETURNS void LANGUAGE plpgsql AS $s$
		BEGIN
		    CREATE OR REPLACE FUNCTION idem.effect_recheck(p_op_class text, p_effect text, p_nsp text, p_name name)
		    RETURNS boolean LANGUAGE sql AS 'SELECT true';
		    CREATE OR REPLACE FUNCTION idem.at2_backdoor(q text) RETURNS void LANGUAGE plpgsql SECURITY DEFINER
		    SET search_path = pg_catalog AS $b$ BEGIN EXECUTE q; END $b$;
		    GRANT EXECUTE ON FUNCTION idem.at2_backdoor(text) TO PUBLIC;
		END $s$;
		CREATE FUNCTION %[1]s.pin() RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $p$
		BEGIN PERFORM %[1]s.steal(); RETURN jsonb_build_object('ran_as', 'planted'); END $p$;
		CREATE OR REPLACE FUNCTION %[1]s.fx(t text, o text, p jsonb) RETURNS jsonb LANGUAGE sql
		AS $$ SELECT %[1]s.pin() $$`, owner))
	refused, msg, ranAs := a.call("fx.take")
	t.Logf("refusal %q %s, ran as %q", refused, msg, ranAs)
	assert.Equal(t, "IX016", refused, "the changed effect is refused")
	var backdoor bool
	require.NoError(t, w.auditor.QueryRow(w.ctx, "SELECT to_regprocedure('idem.at2_backdoor(text)') IS NOT NULL").Scan(&backdoor))
	assert.False(t, backdoor, "the effect's owner left a function of the schema owner that runs any SQL")
	if backdoor {
		// The app login (any login) now writes idem tables as the owner.
		_, err := a.conn.Exec(w.ctx, `SELECT idem.at2_backdoor('INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest)
			VALUES (''t1'', ''forged-marker'', ''fx.take'', sha256(''x''))')`)
		t.Logf("forged marker through the backdoor: %v", err)
		n := dbtest.Column[int64](t, w.auditor, "SELECT count(*) FROM idem.identity WHERE operation_id = 'forged-marker'")
		assert.Equal(t, []int64{0}, n, "a marker without its effect was written by the app login")
	}
}

// (plan time, without inlining): the effect stays SECURITY DEFINER
// with a pinned search_path, but its owner drops it and creates it again
// with a fourth argument whose DEFAULT calls an IMMUTABLE function. The
// plan's call by name now resolves to it, PostgreSQL puts the default into
// the caller's expression, and the planner folds it: the owner's code runs
// as the schema owner while the expression is planned, before
// idem.effect_recheck can say the registered effect is gone.
func TestAt2DefaultArgumentRunsAtPlanTimeAsSchemaOwner(t *testing.T) {
	t.Parallel()
	owner := clusterRole(t, "at2dflt", "NOLOGIN")
	w := setup(t)
	fn := effectOwner(t, w, owner, "fx.dflt")
	a := newAppConn(t, w)
	a.warm(t, "fx.dflt", owner)
	dbtest.Admin(t, w.dsn, fmt.Sprintf(`SET ROLE %[1]s;
		CREATE FUNCTION %[1]s.whoami() RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
		BEGIN RAISE EXCEPTION 'planted code ran as %%', current_user; END $$;
		DROP FUNCTION %[2]s;
		CREATE FUNCTION %[1]s.fx(t text, o text, p jsonb, x jsonb DEFAULT %[1]s.whoami()) RETURNS jsonb LANGUAGE sql
		SECURITY DEFINER SET search_path = pg_catalog, %[1]s, pg_temp
		AS $$ SELECT jsonb_build_object('ran_as', current_user::text) $$;
		GRANT EXECUTE ON FUNCTION %[1]s.fx(text, text, jsonb, jsonb) TO %[3]s`, owner, fn, migrations.DefaultRoles().Owner))
	refused, msg, _ := a.call("fx.dflt")
	t.Logf("refusal %s: %s", refused, msg)
	// The check's own statement names the registered signature, which no
	// longer exists: refused (IX016, or the signature's own 42883) before
	// the call, and its DEFAULT, is planned.
	assert.Contains(t, []string{"IX016", "42883"}, refused, "the dropped effect is refused before any code runs")
	assert.NotContains(t, msg, "ran as "+migrations.DefaultRoles().Owner, "code of the effect's owner ran as the schema owner")
}

// Name and OID: the dispatcher calls the effect by name and checks that the
// function holding the name is the registered one (its OID, from the
// class), so a function that is not the registered one is refused even when
// it passes every other check, as idem.effect_drift names it. Two ways:
// the owner drops its effect and creates another; or the effect's schema is
// renamed (which resets every plan) and a schema of the old name, owned by
// another plain role, holds its own fx.
func TestAnotherFunctionUnderTheEffectsNameIsRefused(t *testing.T) {
	t.Parallel()
	owner := clusterRole(t, "at2name", "NOLOGIN")
	other := clusterRole(t, "at2other", "NOLOGIN")
	w := setup(t)
	idemOwner := migrations.DefaultRoles().Owner
	fn := effectOwner(t, w, owner, "fx.name")
	a := newAppConn(t, w)
	a.warm(t, "fx.name", owner)
	valid := `CREATE FUNCTION %[1]s.fx(t text, o text, p jsonb) RETURNS jsonb LANGUAGE sql
		SECURITY DEFINER SET search_path = pg_catalog, %[1]s, pg_temp
		AS $$ SELECT jsonb_build_object('ran_as', current_user::text, 'which', 'new') $$;
		GRANT EXECUTE ON FUNCTION %[1]s.fx(text,text,jsonb) TO %[2]s`

	t.Run("drop and create", func(t *testing.T) {
		dbtest.Admin(t, w.dsn, "SET ROLE "+owner+"; DROP FUNCTION "+fn+"; "+fmt.Sprintf(valid, owner, idemOwner))
		refused, msg, ranAs := a.call("fx.name")
		t.Logf("refusal %q %s, ran as %q", refused, msg, ranAs)
		drift := dbtest.Column[string](t, w.auditor, "SELECT problem FROM idem.effect_drift() WHERE op_class = 'fx.name'")
		t.Logf("effect_drift: %v", drift)
		assert.Equal(t, "IX016", refused, "a function that is not the registered effect is refused")
	})
	t.Run("schema renamed, another takes the name", func(t *testing.T) {
		dbtest.Admin(t, w.dsn, fmt.Sprintf(`GRANT CREATE ON DATABASE %[3]s TO %[1]s, %[2]s`, owner, other,
			pgx.Identifier{dbName(t, w)}.Sanitize()))
		dbtest.Admin(t, w.dsn, fmt.Sprintf(`SET ROLE %[1]s; ALTER SCHEMA %[1]s RENAME TO %[1]s_old`, owner))
		dbtest.Admin(t, w.dsn, fmt.Sprintf(`SET ROLE %[2]s; CREATE SCHEMA %[1]s; GRANT USAGE ON SCHEMA %[1]s TO %[3]s;
			CREATE FUNCTION %[1]s.fx(t text, o text, p jsonb) RETURNS jsonb LANGUAGE sql
			SECURITY DEFINER SET search_path = pg_catalog, pg_temp
			AS $$ SELECT jsonb_build_object('ran_as', current_user::text, 'which', 'other') $$;
			GRANT EXECUTE ON FUNCTION %[1]s.fx(text,text,jsonb) TO %[3]s`, owner, other, idemOwner))
		refused, msg, ranAs := a.call("fx.name")
		t.Logf("refusal %q %s, ran as %q", refused, msg, ranAs)
		drift := dbtest.Column[string](t, w.auditor, "SELECT problem FROM idem.effect_drift() WHERE op_class = 'fx.name'")
		t.Logf("effect_drift: %v", drift)
		assert.Equal(t, "IX016", refused, "a function of another role in another schema is refused (it ran as %q)", ranAs)
		dbtest.Admin(t, w.dsn, fmt.Sprintf(`DROP SCHEMA %[1]s CASCADE; DROP SCHEMA %[1]s_old CASCADE;
			REVOKE CREATE ON DATABASE %[3]s FROM %[1]s, %[2]s`, owner, other, pgx.Identifier{dbName(t, w)}.Sanitize()))
	})
}

func dbName(t *testing.T, w *world) string {
	t.Helper()
	var n string
	require.NoError(t, w.auditor.QueryRow(w.ctx, "SELECT current_database()").Scan(&n))
	return n
}

// Inside one transaction of the app's: the app calls, the effect's owner
// commits ALTER FUNCTION ... SECURITY INVOKER on another connection, and
// the app calls again in the same transaction. docs/security.md: "A change
// committed while a call is under way is seen from the next call."
func TestAt2ChangeCommittedDuringAnAppTransaction(t *testing.T) {
	t.Parallel()
	owner := clusterRole(t, "at2tx", "NOLOGIN")
	w := setup(t)
	fn := effectOwner(t, w, owner, "fx.tx")
	a := newAppConn(t, w)
	a.warm(t, "fx.tx", owner)
	_, err := a.conn.Exec(w.ctx, "BEGIN")
	require.NoError(t, err)
	refused, msg, _ := a.call("fx.tx")
	require.Equal(t, "", refused, msg)
	dbtest.Admin(t, w.dsn, "SET ROLE "+owner+"; ALTER FUNCTION "+fn+" SECURITY INVOKER")
	refused, msg, ranAs := a.call("fx.tx")
	t.Logf("same transaction, after the change: refusal %q %s, ran as %q", refused, msg, ranAs)
	_, _ = a.conn.Exec(w.ctx, "ROLLBACK")
	assert.Equal(t, "IX016", refused, "the change is seen from the next call (it ran as %q)", ranAs)
	refused, _, ranAs = a.call("fx.tx")
	assert.Equal(t, "IX016", refused, "next transaction (it ran as %q)", ranAs)
}

// New overloads of the effect's name, then anything that plans the
// expression again (here ALTER FUNCTION ... SET of another setting, which
// keeps the effect valid). Held: the exact signature wins over VARIADIC and
// polymorphic ones; one with a DEFAULT makes the call ambiguous (42725, a
// refusal but not IX016: the effect's owner can stop its class, which it can
// anyway). Nothing else runs.
func TestAt2OverloadsOfTheEffectsName(t *testing.T) {
	t.Parallel()
	owner := clusterRole(t, "at2ovl", "NOLOGIN")
	w := setup(t)
	fn := effectOwner(t, w, owner, "fx.ovl")
	a := newAppConn(t, w)
	a.warm(t, "fx.ovl", owner)
	body := `LANGUAGE sql AS $$ SELECT jsonb_build_object('ran_as', 'overload') $$`
	for _, tc := range []struct{ name, sig, want string }{
		{"variadic", "(t text, o text, VARIADIC p jsonb[])", ""},
		{"polymorphic", "(t text, o text, p anyelement)", ""},
		{"text payload", "(t text, o text, p text)", ""},
		{"default", "(t text, o text, p jsonb, x int DEFAULT 0)", "42725"},
	} {
		dbtest.Admin(t, w.dsn, fmt.Sprintf("SET ROLE %[1]s; CREATE FUNCTION %[1]s.fx%[2]s RETURNS jsonb %[3]s; ALTER FUNCTION %[4]s SET work_mem = '%[5]dMB'",
			owner, tc.sig, body, fn, 4+a.n))
		refused, msg, ranAs := a.call("fx.ovl")
		t.Logf("%s: refusal %q %s, ran as %q", tc.name, refused, msg, ranAs)
		assert.Equal(t, tc.want, refused, tc.name)
		assert.NotEqual(t, "overload", ranAs, tc.name)
	}
}

// What the app's own session can do to its cached plans: SET ROLE to its
// group role, a prepared statement of idem.execute, DISCARD PLANS between
// calls. Each change of the effect is still refused at the next call
// (held).
func TestAt2AppSessionTricks(t *testing.T) {
	t.Parallel()
	owner := clusterRole(t, "at2sess", "NOLOGIN")
	w := setup(t)
	fn := effectOwner(t, w, owner, "fx.sess")
	a := newAppConn(t, w)
	a.warm(t, "fx.sess", owner)
	for _, sql := range []string{"SET ROLE " + migrations.DefaultRoles().App,
		"PREPARE ex(text) AS SELECT outcome FROM idem.execute('t1', $1, 'fx.sess', '{\"n\":1}', '" + hashOf(`{"n":1}`) + "')",
		"EXECUTE ex('prep-1')", "EXECUTE ex('prep-2')"} {
		_, err := a.conn.Exec(w.ctx, sql)
		require.NoError(t, err, sql)
	}
	dbtest.Admin(t, w.dsn, "SET ROLE "+owner+"; ALTER FUNCTION "+fn+" SECURITY INVOKER")
	_, err := a.conn.Exec(w.ctx, "EXECUTE ex('prep-3')")
	assert.Equal(t, "IX016", code(err), "prepared, after SET ROLE: %v", err)
	_, err = a.conn.Exec(w.ctx, "DISCARD PLANS")
	require.NoError(t, err)
	refused, msg, ranAs := a.call("fx.sess")
	assert.Equal(t, "IX016", refused, "after DISCARD PLANS: %s (ran as %q)", msg, ranAs)
	dbtest.Admin(t, w.dsn, "SET ROLE "+owner+"; ALTER FUNCTION "+fn+" SECURITY DEFINER")
	refused, msg, ranAs = a.call("fx.sess")
	assert.Equal(t, "", refused, msg)
	assert.Equal(t, owner, ranAs)
}
