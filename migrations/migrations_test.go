package migrations_test

import (
	"context"
	"flag"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/migrations"
)

// emptyDatabase returns a connection to a fresh database with nothing migrated.
func emptyDatabase(t *testing.T) (context.Context, string) {
	t.Helper()
	dsn := dbtest.NewDatabase(t)
	ctx := context.Background()
	dbtest.Admin(t, dsn, "DROP SCHEMA IF EXISTS idem CASCADE; DROP SCHEMA IF EXISTS demo CASCADE; DROP SCHEMA IF EXISTS effects CASCADE")
	return ctx, dsn
}

func TestAllNumberedInOrder(t *testing.T) {
	all, err := migrations.All()
	require.NoError(t, err)
	require.NotEmpty(t, all)
	for i, m := range all {
		assert.Equal(t, i+1, m.Version, "migrations are numbered 001, 002, ... without gaps")
		assert.Len(t, m.Checksum, 64)
	}
}

func TestApplyIsIdempotentAndConcurrentSafe(t *testing.T) {
	t.Parallel()
	ctx, dsn := emptyDatabase(t)
	all, err := migrations.All()
	require.NoError(t, err)

	// Four operators migrate at once: the advisory lock makes exactly one of
	// them apply each migration.
	const runners = 4
	var wg sync.WaitGroup
	applied := make([]int, runners)
	errs := make([]error, runners)
	for i := 0; i < runners; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				errs[i] = err
				return
			}
			defer conn.Close(ctx)
			rep, err := migrations.Apply(ctx, conn, migrations.Options{})
			applied[i], errs[i] = len(rep.Applied), err
		}(i)
	}
	wg.Wait()
	total := 0
	for i := range errs {
		require.NoError(t, errs[i])
		total += applied[i]
	}
	assert.Equal(t, len(all), total)

	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	again, err := migrations.Apply(ctx, conn, migrations.Options{})
	require.NoError(t, err)
	assert.Empty(t, again.Applied, "a second run applies nothing")
	assert.Empty(t, again.CodeInstalled, "nor re-installs the unchanged code package")
	assert.Empty(t, again.CodeDropped)
	var stmt, lock string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')").Scan(&stmt, &lock))
	assert.Equal(t, "0", stmt, "a migration may take long: no statement timeout")
	assert.Equal(t, "10s", lock, "but it never waits long for a lock")

	status, err := migrations.Status(ctx, conn)
	require.NoError(t, err)
	for _, s := range status {
		assert.NotNil(t, s.AppliedAt)
		assert.False(t, s.Drifted)
	}
}

func TestStatusOnEmptyDatabaseAndDrift(t *testing.T) {
	t.Parallel()
	ctx, dsn := emptyDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)

	status, err := migrations.Status(ctx, conn)
	require.NoError(t, err)
	for _, s := range status {
		assert.Nil(t, s.AppliedAt, "nothing is applied yet")
	}
	_, err = migrations.Apply(ctx, conn, migrations.Options{})
	require.NoError(t, err)

	// Someone edits history: the recorded checksum no longer matches.
	_, err = conn.Exec(ctx, "UPDATE idem.schema_migrations SET checksum = repeat('0', 64) WHERE version = 1")
	require.NoError(t, err)
	_, err = migrations.Apply(ctx, conn, migrations.Options{})
	assert.ErrorIs(t, err, migrations.ErrDrift)
	status, err = migrations.Status(ctx, conn)
	require.NoError(t, err)
	assert.True(t, status[0].Drifted)
}

// migrated returns a fresh database with the schema installed, and a
// superuser's connection to it, closed when t ends.
func migrated(t *testing.T) (context.Context, string, *pgx.Conn) {
	t.Helper()
	ctx, dsn := emptyDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	_, err = migrations.Apply(ctx, conn, migrations.Options{})
	require.NoError(t, err)
	return ctx, dsn, conn
}

// TestSchemaNewerThanBinaryIsRefused: an older binary never installs over a
// newer schema or code package, and says which version it needs.
func TestSchemaNewerThanBinaryIsRefused(t *testing.T) {
	t.Parallel()
	ctx, dsn, conn := migrated(t)
	var err error

	dbtest.Admin(t, dsn, "INSERT INTO idem.schema_migrations (version, name, checksum) VALUES (999, 'future', 'x')")
	_, err = migrations.Apply(ctx, conn, migrations.Options{})
	require.ErrorIs(t, err, migrations.ErrSchemaNewer)
	assert.Contains(t, err.Error(), "999")
	dbtest.Admin(t, dsn, "DELETE FROM idem.schema_migrations WHERE version = 999")

	dbtest.Admin(t, dsn, "UPDATE idem.code_package SET version = 999")
	_, err = migrations.Apply(ctx, conn, migrations.Options{})
	require.ErrorIs(t, err, migrations.ErrSchemaNewer)
	assert.Contains(t, err.Error(), "version 999")
}

// TestCodePackageReinstallsWhatChanged: an object whose recorded checksum
// differs is installed again; one no longer in the package is dropped; the
// privileges end as declared whatever was granted by hand meanwhile.
func TestCodePackageReinstallsWhatChanged(t *testing.T) {
	t.Parallel()
	ctx, dsn, conn := migrated(t)
	var err error
	roles := migrations.DefaultRoles()
	problems, err := migrations.Check(ctx, conn, roles)
	require.NoError(t, err)
	assert.Empty(t, problems)

	// Someone replaces a function, grants a write by hand, and leaves an
	// object the package no longer has.
	dbtest.Admin(t, dsn, `SET ROLE idem_owner;
		CREATE OR REPLACE FUNCTION idem.audit_row_hash(p_id bigint, p_at timestamptz, p_actor text, p_person text,
		    p_db_user text, p_action text, p_target text, p_details text, p_prev_hash text)
		RETURNS text LANGUAGE sql AS $$ SELECT 'forged' $$;
		UPDATE idem.code_object SET checksum = 'changed' WHERE object LIKE 'function idem.audit_row_hash(%';
		GRANT INSERT ON idem.quarantine TO idem_operator;
		CREATE FUNCTION idem.gone() RETURNS int LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, idem, pg_temp AS 'SELECT 1';
		INSERT INTO idem.code_object (object, file, checksum) VALUES ('function idem.gone()', '999_gone.sql', 'x')`)
	problems, err = migrations.Check(ctx, conn, roles)
	require.NoError(t, err)
	assert.NotEmpty(t, problems)
	joined := strings.Join(problems, "\n")
	assert.Contains(t, joined, "idem.audit_row_hash")
	assert.Contains(t, joined, "quarantine grants idem_operator INSERT")

	rep, err := migrations.Apply(ctx, conn, migrations.Options{})
	require.NoError(t, err)
	assert.Len(t, rep.CodeInstalled, 1)
	assert.Contains(t, rep.CodeInstalled[0], "idem.audit_row_hash")
	assert.Equal(t, []string{"function idem.gone()"}, rep.CodeDropped)
	problems, err = migrations.Check(ctx, conn, roles)
	require.NoError(t, err)
	assert.Empty(t, problems, "migrate repairs the privileges")
	var h string
	require.NoError(t, conn.QueryRow(ctx, "SELECT idem.audit_row_hash(1, now(), 'a', '', 'b', 'c', '', '{}', 'd')").Scan(&h))
	assert.NotEqual(t, "forged", h)
}

// TestOwnerIsNeverASuperuser: even when a superuser migrates, every object
// belongs to the NOLOGIN owner role, which is no superuser; a pre-existing
// superuser owner role is refused.
func TestOwnerIsNeverASuperuser(t *testing.T) {
	t.Parallel()
	ctx, dsn, conn := migrated(t)
	var err error
	var super, login bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT rolsuper, rolcanlogin FROM pg_roles WHERE rolname = 'idem_owner'").Scan(&super, &login))
	assert.False(t, super)
	assert.False(t, login)
	var foreign int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'idem' AND c.relowner <> 'idem_owner'::regrole`).Scan(&foreign))
	assert.Zero(t, foreign)
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = 'idem' AND p.proowner <> 'idem_owner'::regrole`).Scan(&foreign))
	assert.Zero(t, foreign)

	// Other roles, one of them a superuser: refused before anything is created.
	roles := migrations.RolesWithPrefix("idemctl_t_super")
	dbtest.Admin(t, dsn, "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'idemctl_t_super_owner') THEN CREATE ROLE idemctl_t_super_owner SUPERUSER NOLOGIN; END IF; END $$")
	t.Cleanup(func() { dbtest.Admin(t, dbtest.AdminURL(), "DROP ROLE IF EXISTS idemctl_t_super_owner") })
	_, err = migrations.Apply(ctx, conn, migrations.Options{Roles: roles})
	assert.ErrorIs(t, err, migrations.ErrNotInstallable)
	assert.ErrorContains(t, err, "superuser")
}

var updateVersions = flag.Bool("update", false, "rewrite the last line of code_versions.txt to the current code package")

// TestCodeVersion: a change to the code package goes with a version in
// code_versions.txt, so that an older binary (an older version) is refused
// by a newer schema rather than reinstalling its older functions.
func TestCodeVersion(t *testing.T) {
	raw, err := os.ReadFile("code_versions.txt")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	last := strings.Fields(lines[len(lines)-1])
	require.Len(t, last, 2, "last line: VERSION CHECKSUM")
	sum, err := migrations.PackageChecksum()
	require.NoError(t, err)
	if *updateVersions && last[1] != sum {
		lines[len(lines)-1] = last[0] + " " + sum
		require.NoError(t, os.WriteFile("code_versions.txt", []byte(strings.Join(lines, "\n")+"\n"), 0o644))
		last[1] = sum
	}
	assert.Equal(t, strconv.Itoa(migrations.CodeVersion), last[0], "CodeVersion is the last line's version")
	assert.Equal(t, sum, last[1], "the code package changed: bump CodeVersion and add a line after a release, "+
		"or run go test ./migrations -run TestCodeVersion -update before it")
}

// TestSettleHasNoPlanSetting: idem.settle runs on every call of the
// executor, and a function setting costs a GUC save and restore each time:
// migrate removes the plan_cache_mode an earlier version set on it, also
// when the code package has nothing to reinstall.
func TestSettleHasNoPlanSetting(t *testing.T) {
	t.Parallel()
	ctx, dsn, conn := migrated(t)
	setting := func() string {
		var s string
		require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce(array_to_string(proconfig, ','), '')
			FROM pg_proc WHERE oid = 'idem.settle(text, text, text, text, text, jsonb, boolean)'::regprocedure`).Scan(&s))
		return s
	}
	assert.Empty(t, setting())
	dbtest.Admin(t, dsn, `ALTER FUNCTION idem.settle(text, text, text, text, text, jsonb, boolean) SET plan_cache_mode = force_generic_plan`)
	_, err := migrations.Apply(ctx, conn, migrations.Options{})
	require.NoError(t, err)
	assert.Empty(t, setting())
}

// TestIdentityRowsAreCheckedForTheOwnerToo: the database's own guard on
// idem.identity (019-022: one CHECK calling idem.identity_row_valid) refuses a
// bad row even from the schema owner, who writes the table directly, with
// the rules of idem.identity_problem.
func TestIdentityRowsAreCheckedForTheOwnerToo(t *testing.T) {
	t.Parallel()
	_, dsn, _ := migrated(t)
	digest := `'\x` + strings.Repeat("ab", 32) + `'::bytea`
	insert := func(tenant, op, dig string) error {
		return dbtest.Owner(dsn, "INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest) VALUES ("+
			tenant+", "+op+", 'demo.transfer', "+dig+")")
	}
	require.NoError(t, insert("'t1'", "'op-1'", digest), "a valid row")
	require.NoError(t, insert("'"+strings.Repeat("é", 64)+"'", "'"+strings.Repeat("o", 256)+"'", digest), "128 and 256 bytes")
	for name, row := range map[string][3]string{
		"empty tenant":                 {"''", "'op-2'", digest},
		"tenant of 129 bytes":          {"'" + strings.Repeat("t", 129) + "'", "'op-2'", digest},
		"tenant of 65 two-byte chars":  {"'" + strings.Repeat("é", 65) + "'", "'op-2'", digest},
		"tenant with a tab":            {"E't\\t1'", "'op-2'", digest},
		"tenant with U+0085":           {"E't\\u00851'", "'op-2'", digest},
		"empty operation":              {"'t1'", "''", digest},
		"operation of 257 bytes":       {"'t1'", "'" + strings.Repeat("o", 257) + "'", digest},
		"operation with a newline":     {"'t1'", "E'op\\n2'", digest},
		"operation ending in U+007F":   {"'t1'", "E'op-2\\u007f'", digest},
		"operation with U+0001 inside": {"'t1'", "E'op\\u00012'", digest},
		"digest of 31 bytes":           {"'t1'", "'op-2'", `'\x` + strings.Repeat("ab", 31) + `'::bytea`},
	} {
		err := insert(row[0], row[1], row[2])
		var pgErr *pgconn.PgError
		if assert.ErrorAs(t, err, &pgErr, name) {
			assert.Equal(t, "23514", pgErr.Code, name)
			assert.Equal(t, "identity_row_valid", pgErr.ConstraintName, name)
		}
	}
	err := dbtest.Owner(dsn, "UPDATE idem.identity SET holds = -1 WHERE tenant_id = 't1'")
	var pgErr *pgconn.PgError
	if assert.ErrorAs(t, err, &pgErr) {
		assert.Equal(t, "23514", pgErr.Code, "holds never below zero")
	}
}

// TestIdentityRowValidUpgrade: on a database migrated before 019 that holds
// rows, 019-021 replace the three CHECKs without reading the table and 022
// validates the rows; a row that breaks the rules (written by hand with the
// old constraints dropped) stops 022, and nothing of it is recorded.
func TestIdentityRowValidUpgrade(t *testing.T) {
	t.Parallel()
	ctx, dsn, conn := migrated(t)
	asBefore019 := `SET ROLE idem_owner;
		ALTER TABLE idem.identity DROP CONSTRAINT identity_row_valid,
		    ADD CONSTRAINT identity_valid CHECK (
		        octet_length(tenant_id) BETWEEN 1 AND 128 AND octet_length(operation_id) BETWEEN 1 AND 256
		        AND tenant_id !~ '[\x01-\x1f\x7f-\x9f]' AND operation_id !~ '[\x01-\x1f\x7f-\x9f]'),
		    ADD CONSTRAINT identity_digest_form CHECK (octet_length(payload_digest) = 32),
		    ADD CONSTRAINT identity_holds_check CHECK (holds >= 0);
		DROP FUNCTION idem.identity_row_valid(text, text, bytea, integer);
		DELETE FROM idem.schema_migrations WHERE version BETWEEN 19 AND 22;
		INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest)
		SELECT 't1', 'op-' || i, 'demo.transfer', sha256(i::text::bytea) FROM generate_series(1, 1000) i;`
	dbtest.Admin(t, dsn, asBefore019)
	rep, err := migrations.Apply(ctx, conn, migrations.Options{})
	require.NoError(t, err)
	require.Len(t, rep.Applied, 4)
	assert.Equal(t, 19, rep.Applied[0].Version)
	assert.Equal(t, 22, rep.Applied[3].Version)
	var checks []string
	rows, err := conn.Query(ctx, `SELECT conname || ':' || convalidated FROM pg_constraint
		WHERE conrelid = 'idem.identity'::regclass AND contype = 'c' ORDER BY 1`)
	require.NoError(t, err)
	checks, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"identity_row_valid:true"}, checks)
	problems, err := migrations.Check(ctx, conn, migrations.DefaultRoles())
	require.NoError(t, err)
	assert.Empty(t, problems)

	// A bad row left by hand: 022 refuses it and stays unapplied.
	dbtest.Admin(t, dsn, strings.Replace(asBefore019, "generate_series(1, 1000)", "generate_series(1001, 1001)", 1)+`
		ALTER TABLE idem.identity DROP CONSTRAINT identity_valid;
		INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest) VALUES ('t1', E'bad\n', 'demo.transfer', sha256('x'));
		ALTER TABLE idem.identity ADD CONSTRAINT identity_valid CHECK (tenant_id <> '') NOT VALID;`)
	_, err = migrations.Apply(ctx, conn, migrations.Options{})
	require.ErrorContains(t, err, "022_identity_row_valid_validate")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "23514", pgErr.Code)
	var applied []int
	rows, err = conn.Query(ctx, "SELECT version FROM idem.schema_migrations WHERE version BETWEEN 19 AND 22 ORDER BY 1")
	require.NoError(t, err)
	applied, err = pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	assert.Equal(t, []int{19, 20, 21}, applied, "019-021 applied, 022 not")
}

// TestCodePackageDropsInboxBodyTaken: idem.inbox_body_taken is no longer
// called by anything (idem.inbox_body_ensure reads the partitions once);
// a database whose code package still holds it loses it at migrate, and a
// fresh one never has it.
func TestCodePackageDropsInboxBodyTaken(t *testing.T) {
	t.Parallel()
	ctx, dsn, conn := migrated(t)
	const fn = "idem.inbox_body_taken(date, date, timestamptz, timestamptz)"
	exists := func() bool {
		var ok bool
		require.NoError(t, conn.QueryRow(ctx, "SELECT to_regprocedure($1) IS NOT NULL", fn).Scan(&ok))
		return ok
	}
	assert.False(t, exists(), "a fresh database has no idem.inbox_body_taken")

	// As the previous code package left it.
	dbtest.Admin(t, dsn, `SET ROLE idem_owner;
		CREATE FUNCTION idem.inbox_body_taken(p_from date, p_to date, p_def_min timestamptz, p_def_max timestamptz)
		RETURNS boolean LANGUAGE sql STABLE AS $$ SELECT false $$;
		INSERT INTO idem.code_object (object, file, checksum)
		VALUES ('function `+fn+`', '072_inbox_body_taken.sql', 'x')`)
	require.True(t, exists())
	rep, err := migrations.Apply(ctx, conn, migrations.Options{})
	require.NoError(t, err)
	assert.Equal(t, []string{"function " + fn}, rep.CodeDropped)
	assert.False(t, exists(), "migrate dropped it")
}
