package idem_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
)

type bundle struct {
	ctx  context.Context
	pool *pgxpool.Pool
	dsn  string
}

func setup(t *testing.T, maxConns int32) bundle {
	t.Helper()
	pool, dsn := dbtest.NewPool(t, maxConns)
	return bundle{ctx: context.Background(), pool: pool, dsn: dsn}
}

func transfer(tenant, op string, amount int) idem.Command {
	return idem.Command{
		Identity: idem.Identity{TenantID: tenant, OperationID: op},
		Class:    "demo.transfer",
		Payload:  []byte(fmt.Sprintf(`{"from":"alice","to":"bob","amount":%d,"currency":"EUR"}`, amount)),
	}
}

func (b bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(b.ctx, sql, args...).Scan(&n))
	return n
}

func (b bundle) postings(t *testing.T, tenant, op string) int {
	return b.count(t, "SELECT count(*) FROM demo.posting WHERE tenant_id = $1 AND operation_id = $2", tenant, op)
}

func (b bundle) rowCounts(t *testing.T) [3]int {
	return [3]int{
		b.count(t, "SELECT count(*) FROM idem.inbox"),
		b.count(t, "SELECT count(*) FROM idem.quarantine"),
		b.count(t, "SELECT count(*) FROM demo.posting"),
	}
}

func TestExecuteOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)

	first, err := idem.Execute(b.ctx, b.pool, transfer("t1", "op-1", 500))
	require.NoError(t, err)
	assert.Equal(t, idem.Applied, first.Outcome)
	var resp struct {
		PostingID   string `json:"posting_id"`
		FromBalance int64  `json:"from_balance"`
		ToBalance   int64  `json:"to_balance"`
	}
	require.NoError(t, json.Unmarshal(first.Response, &resp))
	assert.NotEmpty(t, resp.PostingID)
	assert.Equal(t, int64(-500), resp.FromBalance)
	assert.Equal(t, int64(500), resp.ToBalance)

	// The same payload spelled differently is the same operation.
	dup := transfer("t1", "op-1", 0)
	dup.Payload = []byte(`{ "currency" : "EUR", "amount": 5e2, "to": "bob", "from": "\u0061lice" }`)
	second, err := idem.Execute(b.ctx, b.pool, dup)
	require.NoError(t, err)
	assert.Equal(t, idem.AlreadyApplied, second.Outcome)
	assert.Equal(t, string(first.Response), string(second.Response), "the saved response, byte for byte")
	assert.Equal(t, first.Hash, second.Hash)

	third, err := idem.Execute(b.ctx, b.pool, transfer("t1", "op-1", 501))
	require.NoError(t, err)
	assert.Equal(t, idem.Conflict, third.Outcome)
	assert.Nil(t, third.Response, "a conflict never returns the old success")
	assert.NotZero(t, third.QuarantineID)

	assert.Equal(t, 1, b.postings(t, "t1", "op-1"))
	var storedHash, incomingHash string
	var storedPayload, incomingPayload, storedResponse json.RawMessage
	var occurrences int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT stored_hash, incoming_hash, stored_payload, incoming_payload, stored_response, occurrences
		FROM idem.quarantine WHERE id = $1`, third.QuarantineID).
		Scan(&storedHash, &incomingHash, &storedPayload, &incomingPayload, &storedResponse, &occurrences))
	assert.Equal(t, first.Hash, storedHash)
	assert.Equal(t, third.Hash, incomingHash)
	assert.JSONEq(t, `{"from":"alice","to":"bob","amount":500,"currency":"EUR"}`, string(storedPayload))
	assert.JSONEq(t, `{"from":"alice","to":"bob","amount":501,"currency":"EUR"}`, string(incomingPayload))
	assert.JSONEq(t, string(first.Response), string(storedResponse))
	assert.Equal(t, 1, occurrences)

	// The same conflict again is one record with two occurrences.
	again, err := idem.Execute(b.ctx, b.pool, transfer("t1", "op-1", 501))
	require.NoError(t, err)
	assert.Equal(t, idem.Conflict, again.Outcome)
	assert.Equal(t, third.QuarantineID, again.QuarantineID)
	assert.Equal(t, 2, b.count(t, "SELECT occurrences FROM idem.quarantine WHERE id = $1", third.QuarantineID))

	// The original payload still answers with the saved response.
	fourth, err := idem.Execute(b.ctx, b.pool, transfer("t1", "op-1", 500))
	require.NoError(t, err)
	assert.Equal(t, idem.AlreadyApplied, fourth.Outcome)
	assert.Equal(t, string(first.Response), string(fourth.Response))
	assert.Equal(t, 1, b.postings(t, "t1", "op-1"))
}

func TestTenantNamespacing(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	a, err := idem.Execute(b.ctx, b.pool, transfer("tenant-a", "shared-op", 100))
	require.NoError(t, err)
	c, err := idem.Execute(b.ctx, b.pool, transfer("tenant-b", "shared-op", 100))
	require.NoError(t, err)
	assert.Equal(t, idem.Applied, a.Outcome)
	assert.Equal(t, idem.Applied, c.Outcome, "the same operation id in another tenant is another operation")
	assert.Equal(t, 1, b.postings(t, "tenant-a", "shared-op"))
	assert.Equal(t, 1, b.postings(t, "tenant-b", "shared-op"))
	// Balances are per tenant too.
	assert.Equal(t, -100, b.count(t, "SELECT balance FROM demo.account WHERE tenant_id = 'tenant-a' AND account_id = 'alice'"))
}

// TestConcurrentSameIdentity: 32 connections call one identity at once, over
// many identities. Exactly one posting each, byte-identical responses, no error.
func TestConcurrentSameIdentity(t *testing.T) {
	// Not parallel: it holds 33 connections.
	const callers, identities = 32, 25
	b := setup(t, callers+1)
	// Hold callers connections open so that every goroutine has its own.
	conns := make([]*pgxpool.Conn, callers)
	for i := range conns {
		c, err := b.pool.Acquire(b.ctx)
		require.NoError(t, err)
		conns[i] = c
	}
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for n := 0; n < identities; n++ {
		op := fmt.Sprintf("race-%d", n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		results := make([]idem.Result, callers)
		errs := make([]error, callers)
		for i := 0; i < callers; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				results[i], errs[i] = idem.Execute(b.ctx, conns[i], transfer("race", op, 7))
			}(i)
		}
		close(start)
		wg.Wait()
		applied := 0
		for i := range results {
			require.NoError(t, errs[i], "caller %d", i)
			if results[i].Outcome == idem.Applied {
				applied++
			} else {
				require.Equal(t, idem.AlreadyApplied, results[i].Outcome)
			}
			require.Equal(t, string(results[0].Response), string(results[i].Response), "caller %d got another response", i)
		}
		require.Equal(t, 1, applied, "exactly one caller applies %s", op)
		require.Equal(t, 1, b.postings(t, "race", op))
	}
	assert.Equal(t, -7*identities, b.count(t, "SELECT balance FROM demo.account WHERE tenant_id = 'race' AND account_id = 'alice'"))
}

// TestConcurrentDifferentPayloads: one identity, 32 different payloads at once.
// One effect; every other caller is quarantined, none gets the winner's response.
func TestConcurrentDifferentPayloads(t *testing.T) {
	// Not parallel: it holds 32 connections.
	const callers = 32
	b := setup(t, callers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make([]idem.Result, callers)
	errs := make([]error, callers)
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			results[i], errs[i] = idem.Execute(b.ctx, b.pool, transfer("race", "same-op", 1000+i))
		}(i)
	}
	close(start)
	wg.Wait()
	applied, conflicts := 0, 0
	for i, r := range results {
		require.NoError(t, errs[i])
		switch r.Outcome {
		case idem.Applied:
			applied++
		case idem.Conflict:
			conflicts++
			assert.Nil(t, r.Response)
			assert.NotZero(t, r.QuarantineID)
		default:
			t.Fatalf("caller %d: unexpected outcome %s", i, r.Outcome)
		}
	}
	assert.Equal(t, 1, applied)
	assert.Equal(t, callers-1, conflicts)
	assert.Equal(t, 1, b.postings(t, "race", "same-op"))
	assert.Equal(t, callers-1, b.count(t, "SELECT count(*) FROM idem.quarantine WHERE tenant_id = 'race' AND operation_id = 'same-op'"))
}

// TestSerializableIsolation: under SERIALIZABLE a racing caller may get a
// serialization failure to retry, never a wrong answer; retried, all converge.
func TestSerializableIsolation(t *testing.T) {
	t.Parallel()
	const callers = 8
	b := setup(t, callers)
	for _, level := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
		op := "iso-" + string(level)
		var wg sync.WaitGroup
		start := make(chan struct{})
		responses := make([]string, callers)
		for i := 0; i < callers; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				for attempt := 0; attempt < 50; attempt++ {
					var res idem.Result
					err := pgx.BeginTxFunc(b.ctx, b.pool, pgx.TxOptions{IsoLevel: level}, func(tx pgx.Tx) error {
						var err error
						res, err = idem.Execute(b.ctx, tx, transfer("iso", op, 3))
						return err
					})
					if errors.Is(err, idem.ErrSerialization) || isSerialization(err) {
						continue
					}
					if !assert.NoError(t, err) {
						return
					}
					responses[i] = string(res.Response)
					return
				}
				t.Errorf("caller %d never settled", i)
			}(i)
		}
		close(start)
		wg.Wait()
		for i := range responses {
			assert.Equal(t, responses[0], responses[i])
		}
		assert.Equal(t, 1, b.postings(t, "iso", op), string(level))
	}
}

func isSerialization(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// TestBackendKilledBeforeCommit: the call ran, the backend dies before COMMIT.
// Nothing remains, and the retry applies exactly once.
func TestBackendKilledBeforeCommit(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	victim, err := pgx.Connect(b.ctx, b.dsn)
	require.NoError(t, err)
	defer victim.Close(context.Background())
	var pid int
	require.NoError(t, victim.QueryRow(b.ctx, "SELECT pg_backend_pid()").Scan(&pid))
	tx, err := victim.Begin(b.ctx)
	require.NoError(t, err)
	res, err := idem.Execute(b.ctx, tx, transfer("kill", "op-k", 42))
	require.NoError(t, err)
	require.Equal(t, idem.Applied, res.Outcome)

	var terminated bool
	require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT pg_terminate_backend($1, 5000)", pid).Scan(&terminated))
	require.True(t, terminated)
	require.Error(t, tx.Commit(b.ctx), "the commit cannot succeed on a killed backend")

	assert.Equal(t, [3]int{0, 0, 0}, b.rowCounts(t), "nothing remains of the killed transaction")
	retry, err := idem.Execute(b.ctx, b.pool, transfer("kill", "op-k", 42))
	require.NoError(t, err)
	assert.Equal(t, idem.Applied, retry.Outcome)
	again, err := idem.Execute(b.ctx, b.pool, transfer("kill", "op-k", 42))
	require.NoError(t, err)
	assert.Equal(t, idem.AlreadyApplied, again.Outcome)
	assert.Equal(t, 1, b.postings(t, "kill", "op-k"))
}

// TestLiveFirstAttempt: a first attempt holds the claim in an open transaction;
// a second caller waits, and sees its result when it commits, or applies when it
// rolls back.
func TestLiveFirstAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	for _, commit := range []bool{true, false} {
		op := fmt.Sprintf("live-%v", commit)
		tx, err := b.pool.Begin(b.ctx)
		require.NoError(t, err)
		first, err := idem.Execute(b.ctx, tx, transfer("live", op, 9))
		require.NoError(t, err)
		done := make(chan idem.Result, 1)
		go func() {
			r, err := idem.Execute(b.ctx, b.pool, transfer("live", op, 9))
			assert.NoError(t, err)
			done <- r
		}()
		select {
		case <-done:
			t.Fatal("the second caller must wait for the first attempt")
		case <-time.After(200 * time.Millisecond):
		}
		if commit {
			require.NoError(t, tx.Commit(b.ctx))
			r := <-done
			assert.Equal(t, idem.AlreadyApplied, r.Outcome)
			assert.Equal(t, string(first.Response), string(r.Response))
		} else {
			require.NoError(t, tx.Rollback(b.ctx))
			r := <-done
			assert.Equal(t, idem.Applied, r.Outcome)
		}
		assert.Equal(t, 1, b.postings(t, "live", op))
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	cases := []struct {
		name string
		cmd  idem.Command
		want error
	}{
		{"empty tenant", idem.Command{Identity: idem.Identity{"", "op"}, Class: "demo.transfer", Payload: []byte(`{}`)}, idem.ErrInvalidIdentity},
		{"empty operation", idem.Command{Identity: idem.Identity{"t", ""}, Class: "demo.transfer", Payload: []byte(`{}`)}, idem.ErrInvalidIdentity},
		{"tenant too long", idem.Command{Identity: idem.Identity{repeat("x", 129), "op"}, Class: "demo.transfer", Payload: []byte(`{}`)}, idem.ErrInvalidIdentity},
		{"operation too long", idem.Command{Identity: idem.Identity{"t", repeat("é", 129)}, Class: "demo.transfer", Payload: []byte(`{}`)}, idem.ErrInvalidIdentity},
		{"control char", idem.Command{Identity: idem.Identity{"t\n", "op"}, Class: "demo.transfer", Payload: []byte(`{}`)}, idem.ErrInvalidIdentity},
		{"C1 control char", idem.Command{Identity: idem.Identity{"t", "op\u0085"}, Class: "demo.transfer", Payload: []byte(`{}`)}, idem.ErrInvalidIdentity},
		{"invalid utf8", idem.Command{Identity: idem.Identity{"t\xff", "op"}, Class: "demo.transfer", Payload: []byte(`{}`)}, idem.ErrInvalidIdentity},
		{"no class", idem.Command{Identity: idem.Identity{"t", "op"}, Payload: []byte(`{}`)}, idem.ErrInvalidRequest},
		{"unknown class", idem.Command{Identity: idem.Identity{"t", "op"}, Class: "nope.nothing", Payload: []byte(`{}`)}, idem.ErrUnknownClass},
		{"malformed json", idem.Command{Identity: idem.Identity{"t", "op"}, Class: "demo.transfer", Payload: []byte(`{"amount":`)}, idem.ErrInvalidJSON},
		{"duplicate key", idem.Command{Identity: idem.Identity{"t", "op"}, Class: "demo.transfer", Payload: []byte(`{"amount":1,"amount":2}`)}, idem.ErrDuplicateKey},
		{"lossy number", idem.Command{Identity: idem.Identity{"t", "op"}, Class: "demo.transfer", Payload: []byte(`{"amount":9007199254740993}`)}, idem.ErrLossyNumber},
		{"oversized", idem.Command{Identity: idem.Identity{"t", "op"}, Class: "demo.transfer", Payload: []byte(`"` + repeat("a", idem.DefaultMaxPayloadBytes) + `"`)}, idem.ErrPayloadTooLarge},
		{"transport not an object", idem.Command{Identity: idem.Identity{"t", "op"}, Class: "demo.transfer", Payload: []byte(`{}`), Transport: json.RawMessage(`[1]`)}, idem.ErrInvalidTransport},
	}
	for _, tc := range cases {
		_, err := idem.Execute(b.ctx, b.pool, tc.cmd)
		assert.ErrorIs(t, err, tc.want, tc.name)
	}

	effectErrors := map[string]string{
		"negative amount": `{"from":"a","to":"b","amount":-5,"currency":"EUR"}`,
		"zero amount":     `{"from":"a","to":"b","amount":0,"currency":"EUR"}`,
		"fraction":        `{"from":"a","to":"b","amount":1.5,"currency":"EUR"}`,
		"same account":    `{"from":"a","to":"a","amount":5,"currency":"EUR"}`,
		"missing to":      `{"from":"a","amount":5,"currency":"EUR"}`,
		"amount string":   `{"from":"a","to":"b","amount":"5","currency":"EUR"}`,
		"not an object":   `[1,2]`,
	}
	for name, payload := range effectErrors {
		cmd := transfer("t", "bad-"+name, 1)
		cmd.Payload = []byte(payload)
		_, err := idem.Execute(b.ctx, b.pool, cmd)
		var effErr *idem.EffectError
		assert.ErrorAs(t, err, &effErr, name)
		assert.Contains(t, err.Error(), "demo.transfer", name)
	}

	// Straight through the SQL function, as a service in another language
	// would, with the app role's login.
	app := dbtest.PoolAs(t, b.dsn, dbtest.App, 2)
	h := func(payload string) string {
		sum := sha256.Sum256([]byte(payload))
		return idem.HashPrefix + hex.EncodeToString(sum[:])
	}
	deep := strings.Repeat("[", 65) + strings.Repeat("]", 65)
	big := `"` + repeat("a", 1<<20) + `"`
	sqlCases := []struct {
		name string
		args []any
		code string
	}{
		{"empty tenant", []any{"", "op", "demo.transfer", `{}`, h(`{}`), nil}, "IX001"},
		{"null operation", []any{"t", nil, "demo.transfer", `{}`, h(`{}`), nil}, "IX001"},
		{"tenant too long", []any{repeat("x", 129), "op", "demo.transfer", `{}`, h(`{}`), nil}, "IX001"},
		{"control char", []any{"t", "o\tp", "demo.transfer", `{}`, h(`{}`), nil}, "IX001"},
		{"hash without prefix", []any{"t", "op", "demo.transfer", `{}`, repeat("a", 64), nil}, "IX002"},
		{"hash uppercase", []any{"t", "op", "demo.transfer", `{}`, "jcs-sha256:" + repeat("A", 64), nil}, "IX002"},
		{"hash short", []any{"t", "op", "demo.transfer", `{}`, "jcs-sha256:abc", nil}, "IX002"},
		{"unknown class", []any{"t", "op", "x.y", `{}`, h(`{}`), nil}, "IX003"},
		{"null payload", []any{"t", "op", "demo.transfer", nil, h(`{}`), nil}, "IX006"},
		{"hash of another payload", []any{"t", "op", "demo.transfer", `{"amount":100}`, h(`{"amount":999999}`), nil}, "IX010"},
		{"payload over 1 MiB", []any{"t", "op", "demo.transfer", big, h(big), nil}, "IX011"},
		{"nested 65 deep", []any{"t", "op", "demo.transfer", deep, h(deep), nil}, "IX011"},
		{"transport an array", []any{"t", "op", "demo.transfer", `{}`, h(`{}`), `[1]`}, "IX012"},
		{"not JSON", []any{"t", "op", "demo.transfer", `{"a":`, h(`{"a":`), nil}, "22P02"},
		{"effect raises", []any{"t", "op", "demo.transfer", `{"from":"a","to":"a","amount":1,"currency":"EUR"}`,
			h(`{"from":"a","to":"a","amount":1,"currency":"EUR"}`), nil}, "22023"},
	}
	for _, tc := range sqlCases {
		_, err := app.Exec(b.ctx, "SELECT * FROM idem.execute($1, $2, $3, $4, $5, $6)", tc.args...)
		var pgErr *pgconn.PgError
		if assert.ErrorAs(t, err, &pgErr, tc.name) {
			assert.Equal(t, tc.code, pgErr.Code, tc.name+": "+pgErr.Message)
		}
	}
	assert.Equal(t, [3]int{0, 0, 0}, b.rowCounts(t), "bad input wrote nothing")
}

func repeat(s string, n int) string {
	out := make([]byte, 0, len(s)*n)
	for i := 0; i < n; i++ {
		out = append(out, s...)
	}
	return string(out)
}

// TestExecuteFunc: a Go effect under the same protocol and the same SQL.
func TestExecuteFunc(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	dbtest.Admin(t, b.dsn, "CREATE TABLE public.shipment (tenant_id text, operation_id text, item text); "+
		"GRANT INSERT, SELECT ON public.shipment TO idem_app, idem_operator")
	dbtest.RegisterAppClass(t, b.dsn, "shop.ship", "horizon")
	// A service: the app role's login.
	app := dbtest.PoolAs(t, b.dsn, dbtest.App, 4)
	runs := 0
	ship := func(ctx context.Context, tx pgx.Tx) (json.RawMessage, error) {
		runs++
		_, err := tx.Exec(ctx, "INSERT INTO public.shipment VALUES ('t', 'ship-1', 'book')")
		return json.RawMessage(`{"shipped":true}`), err
	}
	cmd := idem.Command{Identity: idem.Identity{"t", "ship-1"}, Class: "shop.ship", Payload: []byte(`{"item":"book"}`)}
	r1, err := idem.ExecuteFunc(b.ctx, app, cmd, ship)
	require.NoError(t, err)
	assert.Equal(t, idem.Applied, r1.Outcome)
	r2, err := idem.ExecuteFunc(b.ctx, app, cmd, ship)
	require.NoError(t, err)
	assert.Equal(t, idem.AlreadyApplied, r2.Outcome)
	assert.JSONEq(t, `{"shipped":true}`, string(r2.Response))
	other := cmd
	other.Payload = []byte(`{"item":"lamp"}`)
	r3, err := idem.ExecuteFunc(b.ctx, app, other, ship)
	require.NoError(t, err)
	assert.Equal(t, idem.Conflict, r3.Outcome)
	assert.NotZero(t, r3.QuarantineID)
	assert.Equal(t, 1, runs)
	assert.Equal(t, 1, b.count(t, "SELECT count(*) FROM public.shipment"))

	// A failing Go effect leaves no inbox row and nothing of its own writes.
	failing := idem.Command{Identity: idem.Identity{"t", "ship-2"}, Class: "shop.ship", Payload: []byte(`{"item":"x"}`)}
	_, err = idem.ExecuteFunc(b.ctx, app, failing, func(ctx context.Context, tx pgx.Tx) (json.RawMessage, error) {
		_, _ = tx.Exec(ctx, "INSERT INTO public.shipment VALUES ('t', 'ship-2', 'x')")
		return nil, errors.New("warehouse closed")
	})
	assert.ErrorContains(t, err, "warehouse closed")
	assert.Equal(t, 0, b.count(t, "SELECT count(*) FROM idem.inbox WHERE operation_id = 'ship-2'"))
	assert.Equal(t, 1, b.count(t, "SELECT count(*) FROM public.shipment"))

	// idem.execute refuses a class whose effect is Go code.
	_, err = idem.Execute(b.ctx, app, cmd)
	assert.ErrorIs(t, err, idem.ErrNoSQLEffect)
	// complete without claim is refused.
	_, err = app.Exec(b.ctx, "SELECT idem.complete('t', 'nothing', '{}')")
	assert.Error(t, err)
}

func TestRegisterClassChecksSignature(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	err := dbtest.Owner(b.dsn, "SELECT idem.register_class('bad.sig', 'pg_catalog.lower(text)'::regprocedure)")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "IX008", pgErr.Code)
}

// TestClaimWithoutCompleteIsRefused: the SQL API cannot commit a marker
// without its effect (the brief's first failure mode), and complete only
// completes a claim of its own transaction.
func TestClaimWithoutCompleteIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	dbtest.RegisterAppClass(t, b.dsn, "app.charge", "forever")
	app := dbtest.PoolAs(t, b.dsn, dbtest.App, 4)
	p, err := idem.Prepare(idem.Command{Identity: idem.Identity{"acme", "marker"}, Class: "app.charge", Payload: []byte(`{"a":1}`)}, idem.PayloadLimits{})
	require.NoError(t, err)

	// Autocommit: the claim is its own transaction and must not commit.
	_, err = app.Exec(b.ctx, "SELECT * FROM idem.claim($1, $2, $3, $4, $5)", p.TenantID, p.OperationID, p.Class, string(p.Canonical), p.Hash)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "IX009", pgErr.Code)

	// Explicit transaction, COMMIT without complete.
	tx, err := app.Begin(b.ctx)
	require.NoError(t, err)
	_, claimed, err := idem.Claim(b.ctx, tx, p)
	require.NoError(t, err)
	require.True(t, claimed)
	err = tx.Commit(b.ctx)
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "IX009", pgErr.Code)
	assert.Equal(t, 0, b.count(t, "SELECT count(*) FROM idem.inbox"), "no marker without its effect")
	assert.Equal(t, 0, b.count(t, "SELECT count(*) FROM idem.pending_claim"))

	// complete in another transaction than the claim is refused.
	_, err = idem.Complete(b.ctx, app, p.Identity, json.RawMessage(`{"ok":true}`))
	assert.ErrorIs(t, err, idem.ErrNotClaimed)

	// The proper sequence commits.
	res, err := idem.ExecuteFunc(b.ctx, app, p.Command, func(context.Context, pgx.Tx) (json.RawMessage, error) {
		return json.RawMessage(`{"ok":true}`), nil
	})
	require.NoError(t, err)
	assert.Equal(t, idem.Applied, res.Outcome)
	assert.Equal(t, 0, b.count(t, "SELECT count(*) FROM idem.pending_claim"))
}

func TestRegisterClassKeepsRetention(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	// demo.transfer is forever; re-registering it as horizon must not weaken it.
	err := dbtest.Owner(b.dsn, "SELECT idem.register_class('demo.transfer', 'demo.transfer_effect(text,text,jsonb)'::regprocedure, 'horizon')")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "IX008", pgErr.Code)
	var retention string
	require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT retention FROM idem.op_class WHERE name = 'demo.transfer'").Scan(&retention))
	assert.Equal(t, "forever", retention)
	// The same registration again is fine (demo init is idempotent).
	err = dbtest.Owner(b.dsn, "SELECT idem.register_class('demo.transfer', 'demo.transfer_effect(text,text,jsonb)'::regprocedure, 'forever')")
	assert.NoError(t, err)
}

func TestNULIsRefusedBeforeTheDatabase(t *testing.T) {
	t.Parallel()
	cmd := transfer("t", "nul", 1)
	cmd.Payload = []byte(`{"from":"a","to":"b","amount":1,"currency":"EUR","memo":"x\u0000y"}`)
	_, err := idem.Prepare(cmd, idem.PayloadLimits{})
	assert.ErrorIs(t, err, idem.ErrNUL)
	// An escaped backslash followed by u0000 is text, not a NUL.
	cmd.Payload = []byte(`{"from":"a","to":"b","amount":1,"currency":"EUR","memo":"x\\u0000y"}`)
	_, err = idem.Prepare(cmd, idem.PayloadLimits{})
	assert.NoError(t, err)

	// The transport is jsonb too: a NUL there is invalid, named, before the
	// database (which would answer 22P05).
	cmd.Transport = []byte(`{"topic":"payments","key":"a\u0000b"}`)
	_, err = idem.Prepare(cmd, idem.PayloadLimits{})
	assert.ErrorIs(t, err, idem.ErrInvalidTransport)
	assert.Contains(t, err.Error(), "U+0000")
	cmd.Transport = []byte(`{"topic":"payments","key":"a\\u0000b"}`)
	_, err = idem.Prepare(cmd, idem.PayloadLimits{})
	assert.NoError(t, err)
}

// TestConflictOfAnotherClassIsItsOwnRecord: the same identity and payload sent
// under another class is a conflict with its own evidence, not a repeat of a
// conflict recorded for another class.
func TestConflictOfAnotherClassIsItsOwnRecord(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	dbtest.RegisterEffect(t, b.dsn, "x.one", "forever", "other_one", `SELECT '{}'::jsonb`)
	dbtest.RegisterEffect(t, b.dsn, "x.two", "forever", "other_two", `SELECT '{}'::jsonb`)
	first, err := idem.Execute(b.ctx, b.pool, transfer("t", "op", 1))
	require.NoError(t, err)
	require.Equal(t, idem.Applied, first.Outcome)
	other := transfer("t", "op", 2)
	ids := map[int64]bool{}
	for _, class := range []string{"x.one", "x.two", "x.one"} {
		other.Class = class
		res, err := idem.Execute(b.ctx, b.pool, other)
		require.NoError(t, err)
		require.Equal(t, idem.Conflict, res.Outcome)
		ids[res.QuarantineID] = true
	}
	assert.Len(t, ids, 2, "one record per incoming class")
	assert.Equal(t, 2, b.count(t, "SELECT count(*) FROM idem.quarantine"))
	assert.Equal(t, 2, b.count(t, "SELECT occurrences FROM idem.quarantine WHERE incoming_class = 'x.one'"))
}

// A replay is answered by reads alone, as a service calls it (the app login):
// it takes no transaction id, so its commit writes and flushes nothing, under
// READ COMMITTED and REPEATABLE READ, through idem.execute and idem.claim.
func TestReplayWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	app := dbtest.PoolAs(t, b.dsn, dbtest.App, 2)
	cmd := transfer("t1", "op-1", 500)
	first, err := idem.Execute(b.ctx, app, cmd)
	require.NoError(t, err)
	require.Equal(t, idem.Applied, first.Outcome)
	// claim replays a class whose effect is application code (a SQL
	// effect's class is refused by claim, IX013).
	dbtest.RegisterAppClass(t, b.dsn, "app.ship", "forever")
	appCmd := idem.Command{Identity: idem.Identity{TenantID: "t1", OperationID: "op-2"}, Class: "app.ship", Payload: []byte(`{"box":1}`)}
	firstApp, err := idem.ExecuteFunc(b.ctx, app, appCmd, func(ctx context.Context, tx pgx.Tx) (json.RawMessage, error) {
		return json.RawMessage(`{"shipped":true}`), nil
	})
	require.NoError(t, err)
	require.Equal(t, idem.Applied, firstApp.Outcome)
	prepared := map[string]idem.Prepared{}
	saved := map[string]json.RawMessage{"execute": first.Response, "claim": firstApp.Response}
	for fn, c := range map[string]idem.Command{"execute": cmd, "claim": appCmd} {
		prepared[fn], err = idem.Prepare(c, idem.PayloadLimits{})
		require.NoError(t, err)
	}
	for _, iso := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead} {
		for _, fn := range []string{"execute", "claim"} {
			p := prepared[fn]
			tx, err := app.BeginTx(b.ctx, pgx.TxOptions{IsoLevel: iso})
			require.NoError(t, err)
			var outcome string
			var response []byte
			require.NoError(t, tx.QueryRow(b.ctx, "SELECT outcome, response FROM idem."+fn+"($1, $2, $3, $4, $5, NULL)",
				p.TenantID, p.OperationID, p.Class, string(p.Canonical), p.Hash).Scan(&outcome, &response))
			assert.Equal(t, "already_applied", outcome)
			assert.JSONEq(t, string(saved[fn]), string(response), "the saved response")
			var xid *string
			require.NoError(t, tx.QueryRow(b.ctx, "SELECT pg_current_xact_id_if_assigned()::text").Scan(&xid))
			assert.Nil(t, xid, "%s under %s took a transaction id: it wrote something", fn, iso)
			require.NoError(t, tx.Commit(b.ctx))
		}
	}
	assert.Equal(t, 1, b.postings(t, "t1", "op-1"))
}

// TestExecuteChecksLikeCheckRequest: idem.execute makes idem.check_request's
// checks itself (a PL/pgSQL call less per operation); each bad request gets
// the same error from both, code, message and hint.
func TestExecuteChecksLikeCheckRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	app := dbtest.PoolAs(t, b.dsn, dbtest.App, 1)
	owner := dbtest.PoolAs(t, b.dsn, dbtest.Superuser, 1)
	h := func(payload string) string {
		sum := sha256.Sum256([]byte(payload))
		return idem.HashPrefix + hex.EncodeToString(sum[:])
	}
	deep := strings.Repeat("[", 65) + strings.Repeat("]", 65)
	big := `"` + repeat("a", 1<<20) + `"`
	cases := [][]any{
		{"", "op", "demo.transfer", `{}`, h(`{}`), nil},
		{"t", nil, "demo.transfer", `{}`, h(`{}`), nil},
		{repeat("x", 129), "op", "demo.transfer", `{}`, h(`{}`), nil},
		{"t", repeat("y", 257), "demo.transfer", `{}`, h(`{}`), nil},
		{"t", "o\u0085p", "demo.transfer", `{}`, h(`{}`), nil},
		{"t", "op", "demo.transfer", `{}`, nil, nil},
		{"t", "op", "demo.transfer", `{}`, "jcs-sha256:" + repeat("A", 64), nil},
		{"t", "op", "x.y", `{}`, h(`{}`), nil},
		{"t", "op", nil, `{}`, h(`{}`), nil},
		{"t", "op", "demo.transfer", nil, h(`{}`), nil},
		{"t", "op", "demo.transfer", `{"amount":100}`, h(`{"amount":999999}`), nil},
		{"t", "op", "demo.transfer", big, h(big), nil},
		{"t", "op", "demo.transfer", deep, h(deep), nil},
		{"t", "op", "demo.transfer", `{}`, h(`{}`), `[1]`},
		{"t", "op", "demo.transfer", `{}`, h(`{}`), `{"big":"` + repeat("z", 16384) + `"}`},
		// Two faults at once: the first check in order names one.
		{"t", "op", "demo.transfer", nil, "jcs-sha256:" + repeat("A", 64), nil},
		{"t", "op", "demo.transfer", nil, nil, nil},
		{"t", "op", "demo.transfer", big, "jcs-sha256:" + repeat("A", 64), nil},
		{"t", "op", "demo.transfer", big, h(`{}`), nil},
		{"t", "op", "demo.transfer", `{}`, "jcs-sha256:" + repeat("0", 63), nil},
	}
	// The order of the checks, for the cases with two faults (a fast path
	// for the well-formed request must not change which one is named).
	wantCode := map[int]string{15: "IX002", 16: "IX002", 17: "IX002", 18: "IX011", 19: "IX002", 10: "IX010", 11: "IX011", 9: "IX006", 5: "IX002", 6: "IX002"}
	for i, args := range cases {
		_, errExec := app.Exec(b.ctx, "SELECT * FROM idem.execute($1, $2, $3, $4, $5, $6)", args...)
		_, errCheck := owner.Exec(b.ctx, "SELECT idem.check_request($1, $2, $3, $4, $5, $6)", args...)
		var pe, pc *pgconn.PgError
		if !assert.ErrorAs(t, errExec, &pe, "case %d: execute", i) || !assert.ErrorAs(t, errCheck, &pc, "case %d: check_request", i) {
			continue
		}
		assert.Equal(t, [3]string{pc.Code, pc.Message, pc.Hint}, [3]string{pe.Code, pe.Message, pe.Hint}, "case %d", i)
		if want, ok := wantCode[i]; ok {
			assert.Equal(t, want, pe.Code, "case %d", i)
		}
	}
	assert.Equal(t, [3]int{0, 0, 0}, b.rowCounts(t), "bad input wrote nothing")
}
