package resolve_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/migrations"
	"github.com/idemctl/idemctl/recovery"
)

// skipLoudly skips with a message that stands out in `go test` output.
func skipLoudly(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(os.Stderr, "\n*** SKIPPED %s: %s ***\n\n", t.Name(), msg)
	t.Skip("SKIPPED LOUDLY: " + msg)
}

// pgBin finds a PostgreSQL server binary (pg_ctl) of the installed version.
func pgBin(name string) string {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) > 0 {
		return matches[len(matches)-1]
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return ""
}

// asPostgres runs a command as the postgres OS user when we are root (the
// server refuses to run as root), or as ourselves otherwise.
func asPostgres(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// startPrimaryAndStandby starts a private primary (initdb into a temporary
// directory, one database "idemctl" migrated with the demo ledger) and a
// streaming standby of it (pg_basebackup -R), each on a free loopback port.
// A private pair, not a standby of the shared test server: a base backup
// copies a whole cluster, and the shared one holds every engineer's test and
// benchmark databases. The primary's superuser migrates it and installs the
// demo, then creates the operator and service logins (dbtest.Operator,
// dbtest.App) that the test connects as. Both are stopped and removed when t
// ends. It returns the primary's superuser DSN and the standby's address.
func startPrimaryAndStandby(t *testing.T) (primaryDSN, standbyHost string, standbyPort int) {
	t.Helper()
	initdb, pgCtl, basebackup := pgBin("initdb"), pgBin("pg_ctl"), pgBin("pg_basebackup")
	if initdb == "" || pgCtl == "" || basebackup == "" {
		skipLoudly(t, "initdb, pg_ctl or pg_basebackup not found: install the PostgreSQL server package to test a real standby")
	}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			skipLoudly(t, "running as root and there is no postgres OS user to run a standby server")
		}
		if _, err := exec.LookPath("runuser"); err != nil {
			skipLoudly(t, "running as root without runuser to start a standby as postgres")
		}
	}
	dir, err := os.MkdirTemp("", "idemctl-standby-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		pg, err := user_(t)
		require.NoError(t, err)
		require.NoError(t, os.Chown(dir, pg[0], pg[1]))
	}
	require.NoError(t, os.Chmod(dir, 0o700))

	start := func(name, data string) {
		out, err := asPostgres(pgCtl, "-D", data, "-l", filepath.Join(dir, name+".log"), "-w", "-t", "60", "start").CombinedOutput()
		if err != nil {
			log, _ := os.ReadFile(filepath.Join(dir, name+".log"))
			t.Fatalf("start %s: %v\n%s\n%s", name, err, out, log)
		}
		t.Cleanup(func() {
			if out, err := asPostgres(pgCtl, "-D", data, "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
				t.Logf("stop %s: %v\n%s", name, err, out)
			}
		})
	}
	hba := "local all all trust\nhost all all 127.0.0.1/32 trust\nlocal replication all trust\nhost replication all 127.0.0.1/32 trust\n"
	// Later lines of postgresql.conf win, so each server's own settings are
	// appended to what initdb (or the base backup) wrote.
	conf := func(data string, port int) {
		body, err := os.ReadFile(filepath.Join(data, "postgresql.conf"))
		require.NoError(t, err)
		extra := fmt.Sprintf("\nport = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nfsync = off\nhot_standby = on\nlogging_collector = off\nmax_connections = 30\nshared_buffers = 16MB\n", port, dir)
		require.NoError(t, writeAsPostgres(filepath.Join(data, "postgresql.conf"), string(body)+extra))
		require.NoError(t, writeAsPostgres(filepath.Join(data, "pg_hba.conf"), hba))
	}

	primary := filepath.Join(dir, "primary")
	out, err := asPostgres(initdb, "-D", primary, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale", "C").CombinedOutput()
	require.NoError(t, err, "initdb: %s", out)
	primaryPort := freePort(t)
	conf(primary, primaryPort)
	start("primary", primary)
	primaryDSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/idemctl?sslmode=disable", primaryPort)
	admin, err := pgx.Connect(context.Background(), fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", primaryPort))
	require.NoError(t, err)
	_, err = admin.Exec(context.Background(), "CREATE DATABASE idemctl")
	admin.Close(context.Background())
	require.NoError(t, err)
	for _, args := range [][]string{{"migrate"}, {"demo", "init"}} {
		code, _, errOut := run(t, primaryDSN, "", args...)
		require.Equal(t, cmdutil.ExitOK, code, "%v: %s", args, errOut)
	}
	conn, err := pgx.Connect(context.Background(), primaryDSN)
	require.NoError(t, err)
	roles := migrations.DefaultRoles()
	for login, group := range map[dbtest.Role]string{dbtest.Operator: roles.Operator, dbtest.App: roles.App} {
		name := pgx.Identifier{string(login)}.Sanitize()
		_, err := conn.Exec(context.Background(), "CREATE ROLE "+name+" LOGIN PASSWORD '"+dbtest.TestPassword+"'; GRANT "+
			pgx.Identifier{group}.Sanitize()+" TO "+name)
		require.NoError(t, err)
	}
	conn.Close(context.Background())

	standby := filepath.Join(dir, "standby")
	out, err = asPostgres(basebackup, "-h", "127.0.0.1", "-p", fmt.Sprint(primaryPort), "-U", "postgres", "-D", standby, "-R", "-X", "stream", "-c", "fast").CombinedOutput()
	require.NoError(t, err, "pg_basebackup: %s", out)
	standbyPort = freePort(t)
	conf(standby, standbyPort)
	start("standby", standby)
	return primaryDSN, "127.0.0.1", standbyPort
}

// user_ returns the postgres OS user's uid and gid.
func user_(t *testing.T) ([2]int, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return [2]int{}, err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return [2]int{uid, gid}, nil
}

func writeAsPostgres(path, body string) error {
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return err
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return os.Chown(path, uid, gid)
	}
	return nil
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A real streaming standby of a private primary: resolve refuses it with exit
// code 4 and one line, concludes nothing, and nothing is written on the primary.
func TestResolveRefusesStandby(t *testing.T) {
	t.Parallel()
	super, host, port := startPrimaryAndStandby(t)
	dsn := dbtest.As(super, dbtest.Operator) // resolve runs as an operator
	ctx := context.Background()
	pool, err := db.Open(ctx, dsn, db.Options{MaxConns: 2})
	require.NoError(t, err)
	defer pool.Close()
	app, err := db.Open(ctx, dbtest.As(super, dbtest.App), db.Options{MaxConns: 1})
	require.NoError(t, err)
	defer app.Close()
	_, err = idem.Execute(ctx, app, idem.Command{Identity: idem.Identity{TenantID: "acme", OperationID: "seen"}, Class: "demo.transfer",
		Payload: []byte(`{"from":"alice","to":"bob","amount":100,"currency":"EUR"}`)})
	require.NoError(t, err)

	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.Host = fmt.Sprintf("%s:%d", host, port)
	standby := u.String()
	// Wait until the standby has replayed the database and accepts connections.
	require.Eventually(t, func() bool {
		conn, err := pgx.Connect(ctx, standby)
		if err != nil {
			return false
		}
		defer conn.Close(ctx)
		var n int
		return conn.QueryRow(ctx, "SELECT count(*) FROM idem.inbox").Scan(&n) == nil && n == 1
	}, 60*time.Second, 200*time.Millisecond, "standby never caught up")

	before := rsvCounts(t, pool)
	audits := rsvCount(t, pool, "SELECT count(*) FROM idem.audit")
	file := rsvFile(t, rsvLine("acme", "seen", 100), rsvLine("acme", "absent", 1), rsvLine("acme", "seen", 101))
	for _, args := range [][]string{
		{"resolve", "--file", file},
		{"resolve", "--file", file, "--dry-run"},
		{"resolve", "--file", file, "-o", "table"},
		{"resolve", "--tenant", "acme", "--op", "absent", "--class", "demo.transfer", "--payload", `{"from":"alice","to":"bob","amount":1,"currency":"EUR"}`},
	} {
		code, out, errOut := run(t, standby, "", args...)
		assert.Equal(t, cmdutil.ExitNotPrimary, code, "%v: %s", args, errOut)
		assert.Empty(t, out, "nothing concluded")
		assert.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
		assert.Contains(t, errOut, "standby (in recovery)")
		assert.Contains(t, errOut, "use a DSN naming the primary, or several hosts with target_session_attrs=read-write")
		assert.Contains(t, errOut, fmt.Sprintf(":%d/", port), "the message names the server refused")
	}

	// The domain check itself, on a standby connection.
	spool, err := db.Open(ctx, standby, db.Options{MaxConns: 1})
	require.NoError(t, err)
	defer spool.Close()
	_, err = recovery.CheckPrimary(ctx, spool)
	var np *recovery.NotPrimaryError
	require.ErrorAs(t, err, &np)
	assert.True(t, np.InRecovery)

	assert.Equal(t, before, rsvCounts(t, pool), "nothing written on the primary")
	assert.Equal(t, audits, rsvCount(t, pool, "SELECT count(*) FROM idem.audit"))

	// A failover in the middle of a run that puts a standby where the primary
	// was (the same address now leads to it): the operations caught in it are
	// retried on a new connection, which the standby refuses; the run stops
	// with exit code 4, saying where the input stopped, and every line
	// reported is applied on the primary.
	proxy, proxied := dbtest.NewProxy(t, dsn)
	lines := make([]string, 600)
	for i := range lines {
		lines[i] = rsvLine("acme", fmt.Sprint("fo-", i), i+1)
	}
	cutAfter(pool, proxy, "fo-%", fmt.Sprintf("%s:%d", host, port))
	code, out, errOut := run(t, proxied, "", "resolve", "--file", rsvFile(t, lines...), "-o", "json", "--max-rate", "300")
	require.Equal(t, cmdutil.ExitNotPrimary, code, errOut)
	msgs := idemctlLines(errOut)
	require.NotEmpty(t, msgs, errOut)
	last := msgs[len(msgs)-1]
	assert.Contains(t, last, "standby (in recovery)")
	assert.Contains(t, last, "nothing after it was attempted")
	rows := rsvJSON(t, out)
	require.NotEmpty(t, rows)
	require.Less(t, len(rows), len(lines))
	for _, row := range rows {
		assert.Equal(t, "applied", row["outcome"], "%v", row)
		assert.Equal(t, 1, rsvCount(t, pool, fmt.Sprintf("SELECT count(*) FROM idem.inbox WHERE operation_id = '%s'", row["operation_id"])))
	}
}
