package redrive_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/redrive"
)

// fakeTarget is an HTTP server on a loopback address of its own that answers
// every request with status (and Location, for a redirect) and keeps the
// headers it heard.
type fakeTarget struct {
	addr    string
	hits    atomic.Int64
	mu      sync.Mutex
	headers []http.Header
}

func newFakeTarget(t *testing.T, ip string, status int, location string) *fakeTarget {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("the attack needs the loopback address %s (every Linux routes 127.0.0.0/8 to lo): %v", ip, err)
	}
	f := &fakeTarget{addr: ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		f.mu.Lock()
		f.headers = append(f.headers, r.Header.Clone())
		f.mu.Unlock()
		if location != "" {
			w.Header().Set("Location", location)
		}
		w.WriteHeader(status)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return f
}

// tcpTrap accepts connections on a loopback address that no allow-list
// holds, and counts them.
func tcpTrap(t *testing.T, ip string) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("the attack needs the loopback address %s (every Linux routes 127.0.0.0/8 to lo): %v", ip, err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			_ = c.Close()
		}
	}()
	return ln.Addr().String(), &n
}

// asOwner runs sql as the test server's superuser on dsn's database: what a
// schema owner does, or a configuration stored before today's rules.
func asOwner(t *testing.T, dsn, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbtest.As(dsn, dbtest.Superuser))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

func outboundWorld(t *testing.T) *redriveWorld {
	t.Helper()
	pool, dsn := dbtest.NewPool(t, 4)
	return &redriveWorld{t: t, pool: pool, dsn: dsn}
}

// A re-drive target on the allow-list answers 307 to a host that is not:
// the redirect is not followed (nothing, neither payload nor credential,
// reaches the Location), the line is an error naming the Location, and the
// operation is not sent again by the run.
func TestRedriveRedirectIsNotFollowed(t *testing.T) {
	w := outboundWorld(t)
	stolen := newFakeTarget(t, "127.0.0.2", http.StatusCreated, "")
	location := "http://" + stolen.addr + "/transfers"
	target := newFakeTarget(t, "127.0.0.1", http.StatusTemporaryRedirect, location)
	t.Setenv("IDEMCTL_REDRIVE_TEST_TOKEN", "Bearer Hunter2Secret")
	_, err := redrive.Set(context.Background(), w.pool, "demo.transfer_app", &redrive.Config{Kind: redrive.KindHTTP,
		URL: "http://" + target.addr + "/transfers", TimeoutSeconds: 2,
		Headers: map[string]string{"Authorization": "env:IDEMCTL_REDRIVE_TEST_TOKEN"}}, true, "alice")
	require.NoError(t, err)

	code, got, errOut := w.resolve([]string{appLine("t1", "op-1", 100)}, "--retry-for", "3s")
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	r := got["t1/op-1"]
	assert.Equal(t, "error", r.Outcome)
	if assert.NotNil(t, r.Error) {
		assert.Contains(t, *r.Error, location, "the line names the Location")
		assert.Contains(t, *r.Error, "never followed")
	}
	assert.EqualValues(t, 1, target.hits.Load(), "sent once, not again")
	assert.Zero(t, stolen.hits.Load(), "nothing reaches the Location")
}

// Every server of a NATS list is on the allow-list, at class set (the CLI and
// the database) and again before a run sends; so is the target of a class
// whose host was taken off the list after it was set.
func TestRedriveEveryServerOnTheAllowList(t *testing.T) {
	t.Parallel()
	w := outboundWorld(t)
	ctx := context.Background()
	trap, reached := tcpTrap(t, "127.0.0.2")
	down := freeAddr(t) // nothing listens: a client moves on to the next server
	list := "nats://" + down + "," + trap
	code, _, errOut := runQ(t, w.dsn, "class", "set", "demo.transfer_app", "--operator", "alice", "--redrive", "nats",
		"--url", list, "--subject", "pay.transfer", "--timeout", "1s", "--downstream-idempotent")
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, errOut, "127.0.0.2 is not on the re-drive allow-list")
	_, err := w.pool.Exec(ctx, `SELECT idem.class_redrive_set('demo.transfer_app', $1, true, 'alice')`,
		`{"kind":"nats","url":"`+list+`","subject":"pay.transfer"}`)
	assert.ErrorContains(t, err, "127.0.0.2 is not on the re-drive allow-list", "the database checks every server")
	_, err = w.pool.Exec(ctx, `SELECT idem.class_redrive_set('demo.transfer_app', $1, true, 'alice')`,
		`{"kind":"nats","url":"nats://`+down+`, tok3n@`+trap+`","subject":"pay.transfer"}`)
	assert.ErrorContains(t, err, "credentials", "a token in any server of the list")

	// Allowed when the class was set, taken off the list since: the run
	// checks before it sends, and nothing reaches the host.
	asOwner(t, w.dsn, "SELECT idem.redrive_allow('127.0.0.2')")
	code, _, errOut = runQ(t, w.dsn, "class", "set", "demo.transfer_app", "--operator", "alice", "--redrive", "nats",
		"--url", list, "--subject", "pay.transfer", "--timeout", "1s", "--downstream-idempotent")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	asOwner(t, w.dsn, "SELECT idem.redrive_disallow('127.0.0.2')")
	code, got, errOut := w.resolve([]string{appLine("t1", "op-1", 100), appLine("t1", "op-2", 100)}, "--retry-for", "1s")
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	for _, op := range []string{"op-1", "op-2"} {
		r := got["t1/"+op]
		assert.Equal(t, "error", r.Outcome)
		if assert.NotNil(t, r.Error) {
			assert.Contains(t, *r.Error, "127.0.0.2 (the schema owner adds it")
			assert.Contains(t, *r.Error, "nothing sent")
		}
	}
	time.Sleep(100 * time.Millisecond)
	assert.Zero(t, reached.Load(), "no connection to a server off the allow-list")

	// The same for an HTTP target: localhost was allowed, then taken off.
	target := newFakeTarget(t, "127.0.0.1", http.StatusCreated, "")
	_, err = redrive.Set(ctx, w.pool, "demo.transfer_app", &redrive.Config{Kind: redrive.KindHTTP,
		URL: "http://localhost:" + strings.Split(target.addr, ":")[1] + "/transfers", TimeoutSeconds: 1}, true, "alice")
	require.NoError(t, err)
	asOwner(t, w.dsn, "SELECT idem.redrive_disallow('localhost')")
	code, got, errOut = w.resolve([]string{appLine("t1", "op-3", 100)}, "--retry-for", "1s")
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Equal(t, "error", got["t1/op-3"].Outcome)
	assert.Zero(t, target.hits.Load(), "nothing sent to a host taken off the allow-list")
}

// An operator names in a class's headers what belongs to whoever runs
// resolve (their database password, a file in their home): refused at class
// set, by the CLI and the database; a configuration stored before these
// rules is refused when a run would send it, with one line naming the
// reference, and nothing is sent. What the runner set aside is sent.
func TestRedriveCredentialReferencesOfTheRunner(t *testing.T) {
	w := outboundWorld(t)
	ctx := context.Background()
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, "id_token"), []byte("PRIVATE-Hunter2\n"), 0o600))
	t.Setenv("PGPASSWORD", "Hunter2Secret")
	target := newFakeTarget(t, "127.0.0.1", http.StatusBadRequest, "")
	url := "http://" + target.addr + "/transfers"

	for _, ref := range []string{"Authorization=env:PGPASSWORD", "X-Token=file:" + filepath.Join(home, "id_token"),
		"X-Token=file:../id_token", "X-Trace=env:HOME"} {
		code, _, errOut := runQ(t, w.dsn, "class", "set", "demo.transfer_app", "--operator", "alice", "--redrive", "http",
			"--url", url, "--header", ref, "--downstream-idempotent")
		assert.Equal(t, cmdutil.ExitUsage, code, "%s: %s", ref, errOut)
		assert.Contains(t, errOut, strings.SplitN(ref, "=", 2)[1], "the refusal names the reference")
		name, value, _ := strings.Cut(ref, "=")
		_, err := w.pool.Exec(ctx, `SELECT idem.class_redrive_set('demo.transfer_app', jsonb_build_object('kind', 'http', 'url', $1::text,
			'headers', jsonb_build_object($2::text, $3::text)), true, 'alice')`, url, name, value)
		assert.ErrorContains(t, err, "header "+name, "the database refuses %s", ref)
	}

	// Stored before these rules (or by the owner by hand): refused at send.
	asOwner(t, w.dsn, `UPDATE idem.op_class SET downstream_idempotent = true, redrive = jsonb_build_object('kind', 'http', 'url', $1::text,
		'headers', jsonb_build_object('Authorization', 'env:PGPASSWORD', 'X-Token', $2::text)) WHERE name = 'demo.transfer_app'`,
		url, "file:"+filepath.Join(home, "id_token"))
	code, got, errOut := w.resolve([]string{appLine("t1", "op-1", 100)}, "--credential-dir", home)
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	r := got["t1/op-1"]
	assert.Equal(t, "error", r.Outcome)
	if assert.NotNil(t, r.Error) {
		assert.Regexp(t, `header (Authorization: env:PGPASSWORD|X-Token: file:/\S+): `, *r.Error)
		assert.Contains(t, *r.Error, "nothing sent")
		assert.NotContains(t, *r.Error, "Hunter2")
	}
	assert.Zero(t, target.hits.Load(), "nothing sent")

	// What the runner set aside: a prefixed variable, a file under the directory.
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "payments"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "payments", "token"), []byte("file-credential\n"), 0o600))
	t.Setenv("IDEMCTL_REDRIVE_PAYMENTS_TOKEN", "Bearer env-credential")
	_, err := redrive.Set(ctx, w.pool, "demo.transfer_app", &redrive.Config{Kind: redrive.KindHTTP, URL: url, TimeoutSeconds: 1,
		Headers: map[string]string{"Authorization": "env:IDEMCTL_REDRIVE_PAYMENTS_TOKEN", "X-Token": "file:payments/token"}}, true, "alice")
	require.NoError(t, err)
	code, got, errOut = w.resolve([]string{appLine("t1", "op-2", 100)}, "--credential-dir", dir)
	assert.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, *got["t1/op-2"].Error, "refused the re-drive", "sent, and the 400 reported")
	require.EqualValues(t, 1, target.hits.Load())
	assert.Equal(t, "Bearer env-credential", target.headers[0].Get("Authorization"))
	assert.Equal(t, "file-credential", target.headers[0].Get("X-Token"))

	// Without --credential-dir (nor IDEMCTL_CREDENTIAL_DIR) no file is read.
	t.Setenv(redrive.CredentialDirEnv, "")
	code, got, _ = w.resolve([]string{appLine("t1", "op-3", 100)})
	assert.Equal(t, cmdutil.ExitInvalid, code)
	assert.Contains(t, *got["t1/op-3"].Error, "file:payments/token: no credential directory is configured")
	assert.EqualValues(t, 1, target.hits.Load(), "nothing more sent")
}
