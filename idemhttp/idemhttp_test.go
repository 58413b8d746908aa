package idemhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/idemhttp"
	"github.com/idemctl/idemctl/internal/dbtest"
)

const class = "shop.order"

// shop is a database with an application-code class whose handler writes
// shop.orders, served through the middleware as the app login.
type shop struct {
	t     *testing.T
	dsn   string
	pool  *pgxpool.Pool // the app login's
	admin *pgxpool.Pool // for counting
	runs  atomic.Int64  // handler runs
	gate  chan struct{} // when set, the handler waits on it
	fail  atomic.Int64  // the handler answers 500 this many times
	srv   *httptest.Server
	dbID  string
	extra func(w http.ResponseWriter, r *http.Request) bool
}

func newShop(t *testing.T) *shop {
	t.Helper()
	dsn := dbtest.NewDatabase(t)
	prepareShop(t, dsn)
	s := &shop{t: t, dsn: dsn, pool: dbtest.PoolAs(t, dsn, dbtest.App, 16), admin: dbtest.PoolAs(t, dsn, dbtest.Superuser, 2)}
	mw, err := idemhttp.New(idemhttp.Config{DB: s.pool, Class: class, InFlightWait: 50 * time.Millisecond})
	require.NoError(t, err)
	s.srv = httptest.NewServer(mw.Wrap(http.HandlerFunc(s.order)))
	t.Cleanup(s.srv.Close)
	s.dbID, err = idem.DatabaseID(context.Background(), s.pool)
	require.NoError(t, err)
	return s
}

// prepareShop creates the business table and registers the class.
func prepareShop(t testing.TB, dsn string) {
	dbtest.Admin(t, dsn, `CREATE SCHEMA shop;
		CREATE TABLE shop.orders (tenant_id text, operation_id text, amount bigint, PRIMARY KEY (tenant_id, operation_id));
		CREATE TABLE shop.provider_charge (key text PRIMARY KEY, requests int NOT NULL DEFAULT 1);
		GRANT USAGE ON SCHEMA shop TO `+string(dbtest.App)+`;
		GRANT SELECT, INSERT, UPDATE ON shop.orders, shop.provider_charge TO `+string(dbtest.App))
	dbtest.RegisterAppClass(t, dsn, class, "forever")
}

// order is the handler: one row in shop.orders, in the middleware's
// transaction; 201 with a Location and a per-response header.
func (s *shop) order(w http.ResponseWriter, r *http.Request) {
	s.runs.Add(1)
	if s.gate != nil {
		<-s.gate
	}
	if s.extra != nil && s.extra(w, r) {
		return
	}
	if s.fail.Add(-1) >= 0 {
		http.Error(w, "provider down", http.StatusBadGateway)
		return
	}
	var in struct{ Amount int64 }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id, _ := idemhttp.Identity(r.Context())
	if _, err := idemhttp.Tx(r.Context()).Exec(r.Context(), "INSERT INTO shop.orders VALUES ($1, $2, $3)",
		id.TenantID, id.OperationID, in.Amount); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Location", "/orders/"+id.OperationID)
	w.Header().Set("X-Request-Id", fmt.Sprint(time.Now().UnixNano()))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"order": id.OperationID, "amount": in.Amount})
}

type reply struct {
	status int
	header http.Header
	body   string
}

func (r reply) problem(t *testing.T) map[string]any {
	t.Helper()
	assert.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
	var p map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.body), &p), r.body)
	assert.EqualValues(t, r.status, p["status"])
	return p
}

func send(t *testing.T, url, method, key, tenant, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set(idemhttp.KeyHeader, key)
	}
	if tenant != "" {
		req.Header.Set(idemhttp.DefaultTenantHeader, tenant)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

func (s *shop) post(key, tenant, body string) reply {
	return send(s.t, s.srv.URL, http.MethodPost, key, tenant, body)
}

func (s *shop) count(sql string, args ...any) int {
	s.t.Helper()
	var n int
	require.NoError(s.t, s.admin.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func TestKeyRequired(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	long := strings.Repeat("k", idem.MaxOperationIDBytes+1)
	for _, tc := range []struct{ name, key, want string }{
		{"missing", "", "required"},
		{"bare token", "abc", "structured-field string"},
		{"unescaped quote", `"a"b"`, "unescaped"},
		{"bad escape", `"a\n"`, "backslash"},
		{"not ASCII", "\"caf\xc3\xa9\"", "printable ASCII"},
		{"empty", `""`, "empty"},
		{"too long", idemhttp.FormatKey(long), "at most 256"},
	} {
		r := s.post(tc.key, "acme", `{"amount":1}`)
		require.Equal(t, http.StatusBadRequest, r.status, tc.name)
		p := r.problem(t)
		assert.Contains(t, p["detail"], "Idempotency-Key", tc.name)
		assert.Contains(t, p["detail"], tc.want, tc.name)
		assert.Equal(t, s.dbID, r.header.Get(idem.DatabaseHeader), tc.name)
	}
	assert.Zero(t, s.runs.Load(), "no handler ran")
	// Methods not configured pass through without a key.
	r := send(t, s.srv.URL, http.MethodGet, "", "", "")
	assert.Equal(t, http.StatusBadRequest, r.status, "GET reaches the handler, which wants a body")
	assert.EqualValues(t, 1, s.runs.Load())
	assert.Zero(t, s.count("SELECT count(*) FROM shop.orders"))
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	cases := []struct {
		name, tenant, body string
		status             int
		detail             string
	}{
		{"no tenant", "", `{"amount":1}`, 400, "Idem-Tenant"},
		{"not JSON", "acme", `{"amount":`, 400, "invalid JSON"},
		{"lossy number", "acme", `{"amount":9007199254740993}`, 422, "would change value"},
		{"duplicate member", "acme", `{"amount":1,"amount":2}`, 422, "duplicate"},
		{"too large", "acme", `{"a":"` + strings.Repeat("x", idem.DefaultMaxPayloadBytes) + `"}`, 413, "over"},
	}
	for _, tc := range cases {
		r := s.post(`"k-1"`, tc.tenant, tc.body)
		require.Equal(t, tc.status, r.status, "%s: %s", tc.name, r.body)
		p := r.problem(t)
		assert.Contains(t, p["detail"], tc.detail, tc.name)
	}
	assert.Zero(t, s.runs.Load())
	assert.Zero(t, s.count("SELECT count(*) FROM idem.inbox"), "nothing recorded")
}

// A retry with the same key and payload (re-serialised) gets the saved
// status, the replayable headers and the body; the handler runs once.
func TestReplay(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	first := s.post(`"order-1"`, "acme", `{"amount":1250,"currency":"EUR"}`)
	require.Equal(t, http.StatusCreated, first.status, first.body)
	assert.Empty(t, first.header.Get(idemhttp.ReplayedHeader))
	for _, body := range []string{`{"currency":"EUR","amount":1250}`, "{ \"amount\" : 1250.0 ,\n \"currency\":\"EUR\" }"} {
		again := s.post(`"order-1"`, "acme", body)
		assert.Equal(t, http.StatusCreated, again.status)
		assert.Equal(t, "true", again.header.Get(idemhttp.ReplayedHeader))
		assert.JSONEq(t, first.body, again.body)
		assert.Equal(t, "/orders/order-1", again.header.Get("Location"))
		assert.Equal(t, "application/json", again.header.Get("Content-Type"))
		assert.Empty(t, again.header.Get("X-Request-Id"), "a header not on the replay list is not replayed")
		assert.Equal(t, s.dbID, again.header.Get(idem.DatabaseHeader))
	}
	assert.EqualValues(t, 1, s.runs.Load(), "the handler ran once")
	assert.Equal(t, 1, s.count("SELECT count(*) FROM shop.orders"))
	// The same key under another tenant is another identity.
	other := s.post(`"order-1"`, "globex", `{"amount":1250,"currency":"EUR"}`)
	assert.Equal(t, http.StatusCreated, other.status)
	assert.Empty(t, other.header.Get(idemhttp.ReplayedHeader))
	assert.Equal(t, 2, s.count("SELECT count(*) FROM shop.orders"))
}

// The same key with another body: 422, quarantined with its evidence, the
// handler does not run.
func TestConflictQuarantined(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	require.Equal(t, http.StatusCreated, s.post(`"order-1"`, "acme", `{"amount":1250}`).status)
	r := s.post(`"order-1"`, "acme", `{"amount":9999}`)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, r.body)
	p := r.problem(t)
	qid, ok := p["quarantine_id"].(float64)
	require.True(t, ok, "the problem names the quarantine record: %v", p)
	var incoming string
	require.NoError(t, s.admin.QueryRow(context.Background(),
		"SELECT incoming_payload::text FROM idem.quarantine WHERE id = $1", int64(qid)).Scan(&incoming))
	assert.JSONEq(t, `{"amount":9999}`, incoming)
	assert.EqualValues(t, 1, s.runs.Load())
	assert.Equal(t, 1, s.count("SELECT count(*) FROM shop.orders"))
}

// A request while the first with its key is in flight is 409 with
// Retry-After; concurrent requests with one key run the handler once.
func TestInFlightAndRaces(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	s.gate = make(chan struct{})
	firstDone := make(chan reply, 1)
	go func() { firstDone <- s.post(`"order-1"`, "acme", `{"amount":5}`) }()
	require.Eventually(t, func() bool { return s.runs.Load() == 1 }, 10*time.Second, 5*time.Millisecond)
	second := s.post(`"order-1"`, "acme", `{"amount":5}`)
	assert.Equal(t, http.StatusConflict, second.status, second.body)
	assert.Equal(t, "1", second.header.Get("Retry-After"))
	second.problem(t)
	close(s.gate)
	assert.Equal(t, http.StatusCreated, (<-firstDone).status)

	// Sixteen at once, the handler slow: it runs once; every answer is the
	// fresh 201, a replay of it, or 409.
	s.gate = nil
	s.runs.Store(0)
	s.extra = func(http.ResponseWriter, *http.Request) bool { time.Sleep(200 * time.Millisecond); return false }
	var wg sync.WaitGroup
	replies := make([]reply, 16)
	for i := range replies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = s.post(`"order-2"`, "acme", `{"amount":7}`)
		}()
	}
	wg.Wait()
	fresh := 0
	for _, r := range replies {
		switch {
		case r.status == http.StatusCreated && r.header.Get(idemhttp.ReplayedHeader) == "":
			fresh++
		case r.status == http.StatusCreated, r.status == http.StatusConflict:
		default:
			t.Errorf("unexpected answer %d %s", r.status, r.body)
		}
	}
	assert.Equal(t, 1, fresh)
	assert.EqualValues(t, 1, s.runs.Load(), "the handler ran once")
	assert.Equal(t, 1, s.count("SELECT count(*) FROM shop.orders WHERE operation_id = 'order-2'"))
}

// A handler's 5xx rolls everything back: nothing recorded, and the retry
// runs the handler again.
func TestServerErrorNotSaved(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	s.fail.Store(1)
	r := s.post(`"order-1"`, "acme", `{"amount":5}`)
	assert.Equal(t, http.StatusBadGateway, r.status)
	assert.Equal(t, s.dbID, r.header.Get(idem.DatabaseHeader))
	assert.Zero(t, s.count("SELECT count(*) FROM idem.inbox"))
	r = s.post(`"order-1"`, "acme", `{"amount":5}`)
	assert.Equal(t, http.StatusCreated, r.status)
	assert.EqualValues(t, 2, s.runs.Load())
	assert.Equal(t, 1, s.count("SELECT count(*) FROM shop.orders"))
	// A panicking handler is a 500 and records nothing.
	s.extra = func(http.ResponseWriter, *http.Request) bool { panic("boom") }
	r = s.post(`"order-2"`, "acme", `{"amount":5}`)
	assert.Equal(t, http.StatusInternalServerError, r.status)
	assert.Zero(t, s.count("SELECT count(*) FROM idem.inbox WHERE operation_id = 'order-2'"))
}

// Every answer names the database the service records into; two databases
// never share the name, a copy under another name included.
func TestDatabaseIdentity(t *testing.T) {
	t.Parallel()
	a, b := newShop(t), newShop(t)
	assert.NotEqual(t, a.dbID, b.dbID)
	assert.Regexp(t, `^[0-9a-f]{32}-[0-9a-f]{8}$`, a.dbID)
	for _, s := range []*shop{a, b} {
		r := s.post(`"order-1"`, "acme", `{"amount":5}`)
		assert.Equal(t, s.dbID, r.header.Get(idem.DatabaseHeader))
	}
}

// The handler charges a provider (outside the transaction) with
// DownstreamKey, then its process is SIGKILLed before the commit; the retry
// runs the handler again and reaches the same charge: one charge, one record.
func TestKilledBetweenDownstreamAndCommit(t *testing.T) {
	t.Parallel()
	dsn := dbtest.NewDatabase(t)
	prepareShop(t, dsn)
	var mu sync.Mutex
	charges := map[string]int{} // key -> requests
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		charges[r.Header.Get("Idempotency-Key")]++
		w.WriteHeader(http.StatusOK)
	}))
	defer provider.Close()

	serve := func(crash bool) (*exec.Cmd, string) {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestChildService$")
		cmd.Env = append(os.Environ(), "IDEMHTTP_CHILD_DSN="+dbtest.As(dsn, dbtest.App), "IDEMHTTP_PROVIDER="+provider.URL,
			fmt.Sprintf("IDEMHTTP_CRASH=%v", crash))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		var addr string
		_, err = fmt.Fscanln(out, &addr)
		require.NoError(t, err)
		return cmd, "http://" + addr
	}
	child, url := serve(true)
	req := func(url string) (*http.Response, error) {
		r, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"amount":1250}`))
		r.Header.Set(idemhttp.KeyHeader, `"charge-1"`)
		r.Header.Set(idemhttp.DefaultTenantHeader, "acme")
		return http.DefaultClient.Do(r)
	}
	_, err := req(url)
	require.Error(t, err, "the process died before replying")
	var ws syscall.WaitStatus
	werr := child.Wait()
	var exitErr *exec.ExitError
	require.True(t, errors.As(werr, &exitErr), "%v", werr)
	ws = exitErr.Sys().(syscall.WaitStatus)
	require.Equal(t, syscall.SIGKILL, ws.Signal())

	child, url = serve(false)
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	resp, err := req(url)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusCreated, resp.StatusCode)

	mu.Lock()
	defer mu.Unlock()
	want := idemhttp.FormatKey(idemhttp.DeriveKey("shop-provider", idem.Identity{TenantID: "acme", OperationID: "charge-1"}))
	assert.Equal(t, map[string]int{want: 2}, charges, "one charge at the provider, asked twice with the same key")
	pool := dbtest.PoolAs(t, dsn, dbtest.Superuser, 2)
	var orders, inbox int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM shop.orders").Scan(&orders))
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM idem.inbox").Scan(&inbox))
	assert.Equal(t, [2]int{1, 1}, [2]int{orders, inbox})
}

// TestChildService is the service process of TestKilledBetweenDownstreamAndCommit.
func TestChildService(t *testing.T) {
	dsn := os.Getenv("IDEMHTTP_CHILD_DSN")
	if dsn == "" {
		return // only as a child process
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	mw, err := idemhttp.New(idemhttp.Config{DB: pool, Class: class, KeyNamespace: "shop-provider"})
	require.NoError(t, err)
	crash := os.Getenv("IDEMHTTP_CRASH") == "true"
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		preq, _ := http.NewRequest(http.MethodPost, os.Getenv("IDEMHTTP_PROVIDER"), nil)
		preq.Header.Set("Idempotency-Key", idemhttp.FormatKey(idemhttp.DownstreamKey(r.Context())))
		presp, err := http.DefaultClient.Do(preq)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		presp.Body.Close()
		id, _ := idemhttp.Identity(r.Context())
		if _, err := idemhttp.Tx(r.Context()).Exec(r.Context(), "INSERT INTO shop.orders VALUES ($1, $2, 1250)", id.TenantID, id.OperationID); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if crash {
			crashNow()
		}
		w.WriteHeader(http.StatusCreated)
	}))
	srv := httptest.NewServer(h)
	fmt.Println(strings.TrimPrefix(srv.URL, "http://"))
	select {} // until killed
}

// A body that is not JSON is saved and replayed byte for byte; a 4xx of the
// handler is saved like any answer below 500.
func TestReplayTextAndClientErrors(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	s.extra = func(w http.ResponseWriter, r *http.Request) bool {
		id, _ := idemhttp.Identity(r.Context())
		if id.OperationID == "text" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte("queued \x00\xff as  is\n"))
			return true
		}
		return false
	}
	first := s.post(`"text"`, "acme", `{"amount":1}`)
	again := s.post(`"text"`, "acme", `{"amount":1}`)
	assert.Equal(t, http.StatusAccepted, again.status)
	assert.Equal(t, first.body, again.body)
	assert.Equal(t, "queued \x00\xff as  is\n", again.body)
	assert.Equal(t, "text/plain; charset=utf-8", again.header.Get("Content-Type"))

	bad := s.post(`"bad"`, "acme", `{"amount":"many"}`)
	require.Equal(t, http.StatusBadRequest, bad.status)
	again = s.post(`"bad"`, "acme", `{"amount":"many"}`)
	assert.Equal(t, http.StatusBadRequest, again.status)
	assert.Equal(t, "true", again.header.Get(idemhttp.ReplayedHeader))
	assert.EqualValues(t, 2, s.runs.Load(), "each key's handler ran once")
}
