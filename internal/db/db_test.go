package db_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
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

// refusingServer is a PostgreSQL server that refuses TLS (as a Debian
// cluster without certificates does) and fails every login with the
// password error; it returns its address.
func refusingServer(t *testing.T) string { return fakeServer(t, nil, nil) }

// fakeServer is a PostgreSQL server that refuses TLS and then, for every
// login: with auth nil, fails it with the password error at once; else
// asks for the password that way and sends each password message it
// receives to got before failing the login.
func fakeServer(t *testing.T, auth pgproto3.BackendMessage, got chan<- string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				be := pgproto3.NewBackend(c, c)
				for {
					msg, err := be.ReceiveStartupMessage()
					if err != nil {
						return
					}
					if _, ok := msg.(*pgproto3.SSLRequest); ok {
						if _, err := c.Write([]byte("N")); err != nil {
							return
						}
						continue
					}
					user := msg.(*pgproto3.StartupMessage).Parameters["user"]
					if auth != nil {
						be.Send(auth)
						if be.Flush() != nil {
							return
						}
						be.SetAuthType(authType(auth))
						if m, err := be.Receive(); err == nil {
							if p, ok := m.(*pgproto3.PasswordMessage); ok {
								got <- p.Password
							}
						}
					}
					be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01",
						Message: fmt.Sprintf("password authentication failed for user %q", user)})
					_ = be.Flush()
					return
				}
			}(c)
		}
	}()
	return ln.Addr().String()
}

// A connection error leads with its cause, in one line, where the DSN came
// from in the hint; the TLS attempt before it is not reported, and an
// unknown host is named once.
func TestConnectErrorLeadsWithTheCause(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr := refusingServer(t)
	_, err := db.Open(ctx, "postgres://alice:wrong@"+addr+"/payments", db.Options{})
	require.Error(t, err)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, `password authentication failed for user "alice" at `+addr+" ("), msg)
	assert.Contains(t, msg, "DSN from --dsn")
	assert.Contains(t, msg, "PGPASSWORD or ~/.pgpass")
	assert.NotContains(t, msg, "TLS")
	assert.NotContains(t, msg, "tls")
	assert.NotContains(t, msg, "wrong")
	assert.ErrorIs(t, err, db.ErrConnect)
	// A DSN someone else chose (an import's source, a replay source) is
	// named as such, not as --dsn; reworded, it still says it did not connect.
	_, err = db.Connect(ctx, "postgres://alice:wrong@"+addr+"/payments", db.Options{Origin: "DSN from --from-postgres"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "(DSN from --from-postgres: alice@"+addr+"/payments;")
	assert.NotContains(t, err.Error(), "--dsn")
	err = db.Reword(err, func(m string) string { return strings.ReplaceAll(m, "alice", "a****") })
	assert.ErrorIs(t, err, db.ErrConnect)
	assert.NotContains(t, err.Error(), "alice")

	_, err = db.Open(ctx, "postgres://alice@no-such-host.invalid:5432/payments?connect_timeout=3", db.Options{})
	require.Error(t, err)
	msg = err.Error()
	assert.True(t, strings.HasPrefix(msg, `unknown host "no-such-host.invalid" at no-such-host.invalid:5432`), msg)
	assert.Equal(t, 1, strings.Count(msg, "unknown host"), "once: %s", msg)
	assert.NotContains(t, msg, "lookup")

	_, err = db.Open(ctx, "postgres://alice@127.0.0.1:1/payments?connect_timeout=2", db.Options{})
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "connection refused at 127.0.0.1:1 ("), err.Error())
}

// The hint names where the DSN came from.
func TestDSNOrigin(t *testing.T) {
	t.Setenv("IDEMCTL_DSN", "postgres://a@db1/x")
	t.Setenv("DATABASE_URL", "postgres://b@db2/y")
	t.Setenv("PGSERVICE", "")
	t.Setenv("PGHOST", "db3")
	t.Setenv("PGSERVICEFILE", "")
	assert.Equal(t, "DSN from IDEMCTL_DSN", db.DSNOrigin("postgres://a@db1/x"))
	assert.Equal(t, "DSN from DATABASE_URL", db.DSNOrigin("postgres://b@db2/y"))
	assert.Equal(t, "DSN from --dsn", db.DSNOrigin("postgres://c@db4/z"))
	assert.Equal(t, "DSN from PGHOST", db.DSNOrigin(""))
	assert.Equal(t, "DSN from --dsn, service prod from ~/.pg_service.conf", db.DSNOrigin("service=prod"))
}

// A replay source's DSN is stored in the database, where another operator
// may have set it to a host of theirs: that host must not get the password
// of the IDEMCTL_SOURCE_* variable it names by asking for it in clear text
// or as an MD5 hash. The connection is refused before the password goes
// (the server never receives a password message) and the error says why.
// The same server asking an import's source (a DSN its own operator typed)
// gets it, as libpq would send it.
func TestStoredSourcePasswordGoesOnlyBySCRAM(t *testing.T) {
	t.Setenv("IDEMCTL_SOURCE_TRAP_PASSWORD", "the-source-secret")
	for _, auth := range []pgproto3.BackendMessage{&pgproto3.AuthenticationCleartextPassword{}, &pgproto3.AuthenticationMD5Password{Salt: [4]byte{1, 2, 3, 4}}} {
		got := make(chan string, 4)
		addr := fakeServer(t, auth, got)
		host, port, _ := net.SplitHostPort(addr)
		dsn := fmt.Sprintf("host=%s port=%s user=replay dbname=outbox sslmode=disable connect_timeout=5", host, port)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := db.ConnectStoredSource(ctx, dsn, "IDEMCTL_SOURCE_TRAP_PASSWORD", "DSN of replay source trap")
		cancel()
		require.Error(t, err, "%T", auth)
		assert.Contains(t, err.Error(), "in clear text or as an MD5 hash: not sent", "%T", auth)
		assert.NotContains(t, err.Error(), "the-source-secret")
		select {
		case p := <-got:
			t.Fatalf("%T: the server received a password message %q", auth, p)
		case <-time.After(200 * time.Millisecond):
		}
	}
	// an import's source: its operator chose the host
	got := make(chan string, 4)
	addr := fakeServer(t, &pgproto3.AuthenticationCleartextPassword{}, got)
	host, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = db.ConnectSource(ctx, fmt.Sprintf("host=%s port=%s user=replay dbname=outbox sslmode=disable", host, port),
		"IDEMCTL_SOURCE_TRAP_PASSWORD", "DSN from --from-postgres")
	select {
	case p := <-got:
		assert.Equal(t, "the-source-secret", p, "the control: this fake server does receive what is sent")
	case <-time.After(5 * time.Second):
		t.Fatal("the control connection sent no password")
	}
}

func authType(m pgproto3.BackendMessage) uint32 {
	if _, ok := m.(*pgproto3.AuthenticationMD5Password); ok {
		return pgproto3.AuthTypeMD5Password
	}
	return pgproto3.AuthTypeCleartextPassword
}
