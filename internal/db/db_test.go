package db_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/dbtest"
)

func TestRedact(t *testing.T) {
	cases := map[string]string{
		"postgres://app:s3cret@db:5432/pay":               "postgres://app:xxxxx@db:5432/pay",
		"postgresql://app:s3cret@db/pay?sslmode=require":  "postgresql://app:xxxxx@db/pay?sslmode=require",
		"postgres://app@db/pay?password=s3cret":           "postgres://app@db/pay?password=xxxxx",
		"host=db user=app password=s3cret dbname=pay":     "host=db user=app password=xxxxx dbname=pay",
		"host=db password='s3 cret' dbname=pay":           "host=db password=xxxxx dbname=pay",
		"postgres://app@db/pay":                           "postgres://app@db/pay",
		"postgres://app:p%40ss@db1:5432,db2:5432/pay?x=1": "",
		"host=db1,db2 target_session_attrs=read-write":    "host=db1,db2 target_session_attrs=read-write",
		"": "",
	}
	for in, want := range cases {
		got := db.Redact(in)
		assert.NotContains(t, got, "s3cret", in)
		assert.NotContains(t, got, "p%40ss", in)
		if want != "" {
			assert.Equal(t, want, got, in)
		}
	}
}

func TestResolveDSNOrder(t *testing.T) {
	t.Setenv("IDEMCTL_DSN", "postgres://a@h/one")
	t.Setenv("DATABASE_URL", "postgres://a@h/two")
	dsn, src := db.ResolveDSN("postgres://a@h/flag")
	assert.Equal(t, "postgres://a@h/flag", dsn)
	assert.EqualValues(t, "--dsn", src)
	dsn, src = db.ResolveDSN("")
	assert.Equal(t, "postgres://a@h/one", dsn)
	assert.EqualValues(t, "IDEMCTL_DSN", src)
	t.Setenv("IDEMCTL_DSN", "")
	dsn, _ = db.ResolveDSN("")
	assert.Equal(t, "postgres://a@h/two", dsn)
	t.Setenv("DATABASE_URL", "")
	dsn, src = db.ResolveDSN("")
	assert.Equal(t, "", dsn)
	assert.EqualValues(t, "PG* environment", src)
}

func TestSessionSettings(t *testing.T) {
	t.Parallel()
	dsn := dbtest.NewDatabase(t)
	ctx := context.Background()
	pool, err := db.Open(ctx, dsn, db.Options{StatementTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer pool.Close()
	var app, stmt, idle string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_setting('application_name'), current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout')").Scan(&app, &stmt, &idle))
	assert.Equal(t, "idemctl", app)
	assert.Equal(t, "5s", stmt)
	assert.Equal(t, "1min", idle)
}

func TestConnectErrorHidesPassword(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Nothing listens on port 1; and a wrong password on the real server.
	for _, dsn := range []string{
		"postgres://app:Sup3rS3cret@127.0.0.1:1/pay?connect_timeout=2",
		"host=127.0.0.1 port=1 user=app password=Sup3rS3cret dbname=pay connect_timeout=2",
		"postgres://app:Sup3rS3cret@127.0.0.1:5432/nonexistent_db_xyz",
		"postgres://app:Sup3rS3cret@[bad",
	} {
		_, err := db.Open(ctx, dsn, db.Options{})
		require.Error(t, err, dsn)
		assert.NotContains(t, err.Error(), "Sup3rS3cret", dsn)
		assert.False(t, strings.Contains(err.Error(), "\n"), "one line: %q", err.Error())
	}
}

func TestRedactEverySecret(t *testing.T) {
	cases := map[string]string{
		"postgress://root:Hunter2Secret@127.0.0.1/db":         "postgress://root:xxxxx@127.0.0.1/db",
		"pg://root:Hunter2Secret@127.0.0.1/db":                "pg://root:xxxxx@127.0.0.1/db",
		"root:Hunter2Secret@127.0.0.1/db":                     "root:xxxxx@127.0.0.1/db",
		"postgres://root:Hunt@er2Secret@127.0.0.1/db":         "postgres://root:xxxxx@127.0.0.1/db",
		"postgres://app@db/pay?sslpassword=Hunter2Secret&x=1": "postgres://app@db/pay?sslpassword=xxxxx&x=1",
		"host=db sslpassword=Hunter2Secret sslkey=/k.pem":     "host=db sslpassword=xxxxx sslkey=/k.pem",
		"host=db sslpassword = 'Hunter2 Secret' dbname=pay":   "host=db sslpassword = xxxxx dbname=pay",
		"postgres://app@db/pay?sslmode=verify-full&user=app":  "postgres://app@db/pay?sslmode=verify-full&user=app",
		"service=prod":               "service=prod",
		"host=db1:5432,db2 user=app": "host=db1:5432,db2 user=app",
		"postgresql://app:Hunter2Secret@[::1]:5432/pay?password=Hu": "postgresql://app:xxxxx@[::1]:5432/pay?password=xxxxx",
	}
	for in, want := range cases {
		got := db.Redact(in)
		assert.Equal(t, want, got, in)
		assert.NotContains(t, got, "Hunter2", in)
		assert.Equal(t, want != in, db.HasSecret(in), in)
	}
}

func TestInvalidDSNNeverEchoesIt(t *testing.T) {
	for _, dsn := range []string{
		"postgress://root:Hunter2Secret@127.0.0.1/db",
		"pg://root:Hunter2Secret@127.0.0.1/db",
		"root:Hunter2Secret@127.0.0.1/db",
		"host=db sslpassword=Hunter2Secret port=notaport",
		"postgres://root:Hunter2Secret@[bad",
	} {
		_, err := db.Config(dsn, db.Options{})
		if err == nil {
			continue // some of these parse as libpq keyword/value; then Describe must still hide it
		}
		assert.NotContains(t, err.Error(), "Hunter2", dsn)
		assert.NotContains(t, db.Describe(dsn), "Hunter2", dsn)
	}
}
