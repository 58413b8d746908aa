package migrations_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
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
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS idem CASCADE; DROP SCHEMA IF EXISTS demo CASCADE")
	require.NoError(t, err)
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
			done, err := migrations.Apply(ctx, conn, migrations.Options{})
			applied[i], errs[i] = len(done), err
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
	assert.Empty(t, again, "a second run applies nothing")

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
