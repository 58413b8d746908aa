package attack_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/migrations"
)

// clusterRole creates a role of the test server for this test alone (roles
// are cluster-wide), dropped after the test's database (cleanups run last
// first, so call it before setup). attrs follow CREATE ROLE; a LOGIN role
// gets the test logins' password, so dbtest.As connects as it.
func clusterRole(t *testing.T, tag, attrs string) string {
	t.Helper()
	name := fmt.Sprintf("idemctl_t_%s_%d", tag, os.Getpid())
	dbtest.Admin(t, dbtest.AdminURL(), "DROP ROLE IF EXISTS "+name)
	if strings.Contains(attrs, "LOGIN") {
		attrs += " PASSWORD '" + dbtest.TestPassword + "'"
	}
	dbtest.Admin(t, dbtest.AdminURL(), "CREATE ROLE "+name+" "+attrs)
	t.Cleanup(func() { dbtest.Admin(t, dbtest.AdminURL(), "DROP ROLE IF EXISTS "+name) })
	return name
}

// effectOwner gives owner a schema of its own with an effect fn that reports
// whom it ran as, written the way the README asks (SECURITY DEFINER, pinned
// search_path, executable by the schema owner), and registers it as class.
func effectOwner(t *testing.T, w *world, owner, class string) string {
	t.Helper()
	idemOwner := migrations.DefaultRoles().Owner
	fn := owner + ".fx(text,text,jsonb)"
	dbtest.Admin(t, w.dsn, fmt.Sprintf(`CREATE SCHEMA %[1]s AUTHORIZATION %[1]s;
		GRANT USAGE ON SCHEMA %[1]s TO %[2]s;
		SET ROLE %[1]s;
		CREATE FUNCTION %[1]s.fx(t text, o text, p jsonb) RETURNS jsonb LANGUAGE sql
		SECURITY DEFINER SET search_path = pg_catalog, %[1]s, pg_temp
		AS $$ SELECT jsonb_build_object('ran_as', current_user::text) $$;
		REVOKE ALL ON FUNCTION %[3]s FROM PUBLIC;
		GRANT EXECUTE ON FUNCTION %[3]s TO %[2]s;`, owner, idemOwner, fn))
	require.NoError(t, dbtest.Owner(w.dsn, "SELECT idem.register_class($1, $2::regprocedure)", class, fn))
	return fn
}

// execAs runs class for a new operation id as the app login and returns the
// SQLSTATE of its refusal ("" when it ran) and whom the effect ran as.
func (w *world) execAs(class, op string) (string, string) {
	w.t.Helper()
	payload := `{"n":1}`
	var outcome string
	var resp map[string]string
	var qid *int64
	err := w.app.QueryRow(w.ctx, "SELECT outcome, response, quarantine_id FROM idem.execute('t1', $1, $2, $3, $4)",
		op, class, payload, hashOf(payload)).Scan(&outcome, &resp, &qid)
	if err != nil {
		return code(err), ""
	}
	return "", resp["ran_as"]
}

// Finding (trust boundary, round two, 1): an effect checked once at
// registration was then changed by its owner (CREATE OR REPLACE ... SECURITY
// INVOKER, same OID) and ran as the schema owner. Every change that makes an
// effect fail the registration's checks, by its owner, by a CREATEROLE login
// or by a superuser, is refused at the next call (IX016, nothing written)
// and named by idem.effect_drift for the operator and the auditor.
func TestEffectChangedAfterRegistrationIsRefused(t *testing.T) {
	t.Parallel()
	creator := clusterRole(t, "crole", "LOGIN CREATEROLE")
	idemOwner := migrations.DefaultRoles().Owner
	cases := []struct {
		name   string
		attack string // %[1]s the effect owner, %[2]s the effect, %[3]s the schema owner, %[4]s the app role
		as     string // "owner" (SET ROLE to the effect's owner), "creator" (a CREATEROLE login), "" superuser
	}{
		{"create or replace invoker", `CREATE OR REPLACE FUNCTION %[1]s.fx(t text, o text, p jsonb) RETURNS jsonb LANGUAGE sql
			SECURITY INVOKER AS $$ SELECT jsonb_build_object('ran_as', current_user::text) $$`, "owner"},
		{"alter invoker", `ALTER FUNCTION %[2]s SECURITY INVOKER`, "owner"},
		{"reset search_path", `ALTER FUNCTION %[2]s RESET search_path`, "owner"},
		{"owner to schema owner", `ALTER FUNCTION %[2]s OWNER TO %[3]s`, ""},
		{"owner to superuser", `ALTER FUNCTION %[2]s OWNER TO CURRENT_USER`, ""},
		{"drop and create", `DROP FUNCTION %[2]s; CREATE FUNCTION %[1]s.fx(t text, o text, p jsonb) RETURNS jsonb LANGUAGE sql
			AS $$ SELECT jsonb_build_object('ran_as', current_user::text) $$; GRANT EXECUTE ON FUNCTION %[2]s TO %[3]s`, "owner"},
		{"drop and create returning text", `DROP FUNCTION %[2]s; CREATE FUNCTION %[1]s.fx(t text, o text, p jsonb) RETURNS text LANGUAGE sql
			SECURITY DEFINER SET search_path = pg_catalog, %[1]s, pg_temp AS $$ SELECT jsonb_build_object('ran_as', current_user::text)::text $$;
			GRANT EXECUTE ON FUNCTION %[2]s TO %[3]s`, "owner"},
		{"rename and replace", `ALTER FUNCTION %[2]s RENAME TO fx_old; CREATE FUNCTION %[1]s.fx(t text, o text, p jsonb) RETURNS jsonb LANGUAGE sql
			AS $$ SELECT jsonb_build_object('ran_as', current_user::text) $$; GRANT EXECUTE ON FUNCTION %[2]s TO %[3]s`, "owner"},
		{"owner given createrole", `ALTER ROLE %[1]s CREATEROLE`, "creator"},
		{"owner given bypassrls", `ALTER ROLE %[1]s BYPASSRLS`, ""},
		{"owner made superuser", `ALTER ROLE %[1]s SUPERUSER`, ""},
		{"owner granted pg_write_all_data", `GRANT pg_write_all_data TO %[1]s`, ""},
		{"owner granted pg_execute_server_program", `GRANT pg_execute_server_program TO %[1]s`, ""},
		{"owner granted the app role", `GRANT %[4]s TO %[1]s`, "creator"},
		{"owner granted the schema owner", `GRANT %[3]s TO %[1]s`, "creator"},
	}
	owners := make([]string, len(cases))
	for i := range cases {
		owners[i] = clusterRole(t, fmt.Sprintf("eff%d", i), "NOLOGIN")
	}
	w := setup(t)
	creatorConn, err := pgx.Connect(w.ctx, dbtest.As(w.dsn, dbtest.Role(creator)))
	require.NoError(t, err)
	defer creatorConn.Close(w.ctx)
	for i, tc := range cases {
		class := fmt.Sprintf("fx.c%d", i)
		fn := effectOwner(t, w, owners[i], class)
		refused, ranAs := w.execAs(class, class+"-before")
		require.Equal(t, "", refused, tc.name)
		require.Equal(t, owners[i], ranAs, "%s: the registered effect runs as its own owner", tc.name)

		sql := fmt.Sprintf(tc.attack, owners[i], fn, idemOwner, migrations.DefaultRoles().App)
		switch tc.as {
		case "owner":
			dbtest.Admin(t, w.dsn, "SET ROLE "+owners[i]+"; "+sql)
		case "creator":
			_, err := creatorConn.Exec(w.ctx, sql)
			require.NoError(t, err, "%s: a CREATEROLE login may do this", tc.name)
		default:
			dbtest.Admin(t, w.dsn, sql)
		}
		before := w.snapshot()
		refused, ranAs = w.execAs(class, class+"-after")
		assert.Equal(t, "IX016", refused, "%s: the executor refuses the changed effect (it ran as %q)", tc.name, ranAs)
		assert.Equal(t, before, w.snapshot(), "%s: nothing was written", tc.name)

		drift := dbtest.Column[string](t, w.auditor, "SELECT op_class FROM idem.effect_drift()")
		assert.Contains(t, drift, class, "%s: effect_drift names the class", tc.name)
	}
	// Registration itself refuses an owner that could reach the owner's rights.
	late := clusterRole(t, "efflate", "NOLOGIN CREATEROLE")
	dbtest.Admin(t, w.dsn, fmt.Sprintf(`CREATE SCHEMA %[1]s AUTHORIZATION %[1]s; GRANT USAGE ON SCHEMA %[1]s TO %[2]s; SET ROLE %[1]s;
		CREATE FUNCTION %[1]s.fx(t text, o text, p jsonb) RETURNS jsonb LANGUAGE sql SECURITY DEFINER
		SET search_path = pg_catalog, pg_temp AS $$ SELECT '{}'::jsonb $$;
		GRANT EXECUTE ON FUNCTION %[1]s.fx(text,text,jsonb) TO %[2]s`, late, idemOwner))
	err = dbtest.Owner(w.dsn, "SELECT idem.register_class('fx.late', $1::regprocedure)", late+".fx(text,text,jsonb)")
	assert.Equal(t, "IX008", code(err), "an effect owned by a CREATEROLE role is not registered: %v", err)
	dbtest.Admin(t, w.dsn, "DROP SCHEMA "+late+" CASCADE")
}

// The per-call check costs no registration: an effect that passes its checks
// runs on every call, on a pooled connection whose plans are cached, and a
// change undone lets it run again.
func TestEffectUndoneRunsAgain(t *testing.T) {
	t.Parallel()
	owner := clusterRole(t, "effundo", "NOLOGIN")
	w := setup(t)
	fn := effectOwner(t, w, owner, "fx.undo")
	for i := 0; i < 3; i++ {
		refused, _ := w.execAs("fx.undo", fmt.Sprintf("a%d", i))
		require.Equal(t, "", refused)
	}
	dbtest.Admin(t, w.dsn, "SET ROLE "+owner+"; ALTER FUNCTION "+fn+" SECURITY INVOKER")
	refused, _ := w.execAs("fx.undo", "b")
	assert.Equal(t, "IX016", refused)
	// doctor (an operator) and migrate (the admin) name it.
	c, out, _ := idemctl(t, dbtest.As(w.dsn, dbtest.Operator), "doctor", "-o", "json", "--skip-sources")
	assert.Equal(t, cmdutil.ExitFailure, c)
	assert.Contains(t, out, `"check":"effects","verdict":"fail"`)
	assert.Contains(t, out, "class fx.undo: effect "+fn)
	c, _, errOut := idemctl(t, w.dsn, "migrate")
	assert.Equal(t, cmdutil.ExitOK, c, errOut)
	assert.Contains(t, errOut, "warning: class fx.undo: effect "+fn+" must be SECURITY DEFINER")
	dbtest.Admin(t, w.dsn, "SET ROLE "+owner+"; ALTER FUNCTION "+fn+" SECURITY DEFINER")
	refused, ranAs := w.execAs("fx.undo", "c")
	assert.Equal(t, "", refused)
	assert.Equal(t, owner, ranAs)
	assert.Empty(t, dbtest.Column[string](t, w.operator, "SELECT op_class FROM idem.effect_drift()"))
}

// The per-call check is a statement of its own that runs before the call of
// the effect is planned. On one app connection, whose plans stay cached
// between calls, every change is refused at the very next call and its
// undoing runs again at the next.
func TestEffectCheckFollowsEveryChangeOnOneConnection(t *testing.T) {
	t.Parallel()
	creator := clusterRole(t, "fcrole", "LOGIN CREATEROLE")
	owner := clusterRole(t, "efffollow", "NOLOGIN")
	w := setup(t)
	fn := effectOwner(t, w, owner, "fx.follow")
	idemOwner := migrations.DefaultRoles().Owner
	app, err := pgx.Connect(w.ctx, dbtest.As(w.dsn, dbtest.App))
	require.NoError(t, err)
	defer app.Close(w.ctx)
	creatorConn, err := pgx.Connect(w.ctx, dbtest.As(w.dsn, dbtest.Role(creator)))
	require.NoError(t, err)
	defer creatorConn.Close(w.ctx)
	n := 0
	call := func() (string, string) {
		n++
		payload := `{"n":1}`
		var outcome string
		var resp map[string]string
		var qid *int64
		err := app.QueryRow(w.ctx, "SELECT outcome, response, quarantine_id FROM idem.execute('t1', $1, 'fx.follow', $2, $3)",
			fmt.Sprint("op-", n), payload, hashOf(payload)).Scan(&outcome, &resp, &qid)
		if err != nil {
			return code(err), ""
		}
		return "", resp["ran_as"]
	}
	definer := `CREATE OR REPLACE FUNCTION %[1]s.fx(t text, o text, p jsonb) RETURNS jsonb LANGUAGE sql
		SECURITY DEFINER SET search_path = pg_catalog, %[1]s, pg_temp AS $$ SELECT jsonb_build_object('ran_as', current_user::text) $$`
	cases := []struct {
		name, change, undo string
		as                 string // "owner", "creator", "" superuser
	}{
		{"create or replace invoker", `CREATE OR REPLACE FUNCTION %[1]s.fx(t text, o text, p jsonb) RETURNS jsonb LANGUAGE sql
			SECURITY INVOKER AS $$ SELECT jsonb_build_object('ran_as', current_user::text) $$`, definer, "owner"},
		{"alter invoker", `ALTER FUNCTION %[2]s SECURITY INVOKER`, `ALTER FUNCTION %[2]s SECURITY DEFINER`, "owner"},
		{"reset search_path", `ALTER FUNCTION %[2]s RESET search_path`, `ALTER FUNCTION %[2]s SET search_path = pg_catalog, %[1]s, pg_temp`, "owner"},
		// (Given back, the function's rights are its owner's alone: the
		// schema owner's EXECUTE is granted again.)
		{"owner to schema owner", `ALTER FUNCTION %[2]s OWNER TO %[3]s`, `ALTER FUNCTION %[2]s OWNER TO %[1]s; GRANT EXECUTE ON FUNCTION %[2]s TO %[3]s`, ""},
		{"execute revoked from the schema owner", `REVOKE EXECUTE ON FUNCTION %[2]s FROM %[3]s`, `GRANT EXECUTE ON FUNCTION %[2]s TO %[3]s`, "owner"},
		{"owner given createrole", `ALTER ROLE %[1]s CREATEROLE`, `ALTER ROLE %[1]s NOCREATEROLE`, "creator"},
		{"owner given bypassrls", `ALTER ROLE %[1]s BYPASSRLS`, `ALTER ROLE %[1]s NOBYPASSRLS`, ""},
		{"owner made superuser", `ALTER ROLE %[1]s SUPERUSER`, `ALTER ROLE %[1]s NOSUPERUSER`, ""},
		{"owner given replication", `ALTER ROLE %[1]s REPLICATION`, `ALTER ROLE %[1]s NOREPLICATION`, ""},
		{"owner granted pg_read_server_files", `GRANT pg_read_server_files TO %[1]s`, `REVOKE pg_read_server_files FROM %[1]s`, ""},
		{"owner granted the schema owner", `GRANT %[3]s TO %[1]s`, `REVOKE %[3]s FROM %[1]s`, "creator"},
		{"owner given usage on schema idem", `GRANT USAGE ON SCHEMA idem TO %[1]s`, `REVOKE USAGE ON SCHEMA idem FROM %[1]s`, ""},
	}
	run := func(as, sql string) {
		t.Helper()
		switch as {
		case "owner":
			dbtest.Admin(t, w.dsn, "SET ROLE "+owner+"; "+sql)
		case "creator":
			_, err := creatorConn.Exec(w.ctx, sql)
			require.NoError(t, err, sql)
		default:
			dbtest.Admin(t, w.dsn, sql)
		}
	}
	refused, ranAs := call()
	require.Equal(t, "", refused)
	require.Equal(t, owner, ranAs)
	for _, tc := range cases {
		run(tc.as, fmt.Sprintf(tc.change, owner, fn, idemOwner))
		refused, ranAs = call()
		assert.Equal(t, "IX016", refused, "%s: refused at the next call on the same connection (it ran as %q)", tc.name, ranAs)
		run(tc.as, fmt.Sprintf(tc.undo, owner, fn, idemOwner))
		refused, ranAs = call()
		assert.Equal(t, "", refused, "%s undone: runs again on the same connection", tc.name)
		assert.Equal(t, owner, ranAs, "%s undone", tc.name)
	}
}
