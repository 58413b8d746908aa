package recovery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/recovery"
)

type bundle struct {
	ctx  context.Context
	pool *pgxpool.Pool // an operator's: resolve runs as an operator
	// app is a service's pool (the app role): the first attempts that
	// resolve settles are the service's.
	app *pgxpool.Pool
	dsn string
}

func setup(t *testing.T, maxConns int32) bundle {
	t.Helper()
	pool, dsn := dbtest.NewPool(t, maxConns)
	return bundle{ctx: context.Background(), pool: pool, app: dbtest.PoolAs(t, dsn, dbtest.App, 2), dsn: dsn}
}

func (b bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(b.ctx, sql, args...).Scan(&n))
	return n
}

// rowCounts are the tables a run may write: inbox, quarantine, postings.
func (b bundle) rowCounts(t *testing.T) [3]int {
	return [3]int{
		b.count(t, "SELECT count(*) FROM idem.inbox"),
		b.count(t, "SELECT count(*) FROM idem.quarantine"),
		b.count(t, "SELECT count(*) FROM demo.posting"),
	}
}

func line(tenant, op string, amount int) string {
	return fmt.Sprintf(`{"tenant":%q,"operation_id":%q,"class":"demo.transfer","payload":{"from":"alice","to":"bob","amount":%d,"currency":"EUR"}}`, tenant, op, amount)
}

func transfer(tenant, op string, amount int) idem.Command {
	return idem.Command{
		Identity: idem.Identity{TenantID: tenant, OperationID: op},
		Class:    "demo.transfer",
		Payload:  []byte(fmt.Sprintf(`{"from":"alice","to":"bob","amount":%d,"currency":"EUR"}`, amount)),
	}
}

// resolve runs input through a Resolver and collects every result.
func (b bundle) resolve(t *testing.T, cfg recovery.Config, input string) (recovery.RunSummary, []recovery.Result, error) {
	t.Helper()
	if cfg.Operator == "" {
		cfg.Operator = "tester"
	}
	r := &recovery.Resolver{Pool: b.pool, Config: cfg}
	var mu sync.Mutex
	var out []recovery.Result
	sum, err := r.Run(b.ctx, recovery.NDJSON(strings.NewReader(input), idem.DefaultMaxPayloadBytes+recovery.LineSlack), func(res recovery.Result) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, res)
		return nil
	})
	return sum, out, err
}

func outcomes(rs []recovery.Result) []recovery.Outcome {
	out := make([]recovery.Outcome, len(rs))
	for i, r := range rs {
		out[i] = r.Outcome
	}
	return out
}

// fixture applies acme/seen and returns a batch with every outcome, one a
// line, and the outcomes a real run gives them in order.
func fixture(t *testing.T, b bundle) (string, []recovery.Outcome, json.RawMessage) {
	t.Helper()
	seen, err := idem.Execute(b.ctx, b.app, transfer("acme", "seen", 100))
	require.NoError(t, err)
	input := strings.Join([]string{
		// already applied: same payload, other spelling
		`{"tenant":"acme","operation_id":"seen","class":"demo.transfer","payload":{ "currency":"EUR", "amount":1e2, "to":"bob", "from":"alice" }}`,
		line("acme", "new-1", 5),  // applied
		line("acme", "seen", 101), // conflict
		`not json`,
		`{"tenant":"acme","operation_id":"x","class":"demo.transfer"}`,                                                                      // missing payload
		`{"tenant":"","operation_id":"x","class":"demo.transfer","payload":{}}`,                                                             // invalid identity
		`{"tenant":"acme","operation_id":"x","class":"demo.transfer","payload":{"amount":9007199254740993}}`,                                // lossy number
		`{"tenant":"acme","operation_id":"x","class":"no.such.class","payload":{}}`,                                                         // unknown class
		`{"tenant":"acme","operation_id":"x","class":"demo.transfer","payload":{},"extra":1}`,                                               // unknown field
		`{"tenant":"acme","operation_id":"neg","class":"demo.transfer","payload":{"from":"alice","to":"bob","amount":-1,"currency":"EUR"}}`, // effect fails
		``,
		line("acme", "new-2", 7), // applied
	}, "\n")
	want := []recovery.Outcome{recovery.AlreadyApplied, recovery.Applied, recovery.Conflict,
		recovery.Invalid, recovery.Invalid, recovery.Invalid, recovery.Invalid, recovery.Invalid, recovery.Invalid,
		recovery.Failed, recovery.Applied}
	return input, want, seen.Response
}

func TestResolveOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t, 5)
	input, want, seenResponse := fixture(t, b)
	before := b.rowCounts(t)

	sum, res, err := b.resolve(t, recovery.Config{Concurrency: 4, Operator: "ada", Source: "fixture"}, input)
	require.NoError(t, err)
	require.Equal(t, want, outcomes(res))
	for i := 1; i < len(res); i++ {
		assert.Less(t, res[i-1].Line, res[i].Line, "results come in input order")
	}
	assert.Equal(t, 12, res[len(res)-1].Line, "line numbers count the blank line")

	already := res[0]
	assert.JSONEq(t, string(seenResponse), string(already.Response), "the saved response is returned")
	assert.Equal(t, already.IncomingHash, already.StoredHash)

	applied := res[1]
	assert.Contains(t, string(applied.Response), "posting_id")
	assert.Empty(t, applied.StoredHash)

	conflict := res[2]
	assert.NotZero(t, conflict.QuarantineID)
	assert.Nil(t, conflict.Response, "a conflict never returns the old success as its own")
	assert.Equal(t, already.StoredHash, conflict.StoredHash)
	assert.NotEqual(t, conflict.StoredHash, conflict.IncomingHash)
	assert.Equal(t, "ada", b.detectedOperator(t, conflict.QuarantineID))

	for i, sub := range []string{"not JSON", "missing field payload", "tenant_id is required", "9007199254740993", "unknown operation class", `unknown field "extra"`} {
		r := res[3+i]
		require.Error(t, r.Err)
		assert.Contains(t, r.Err.Error(), sub)
	}
	assert.ErrorContains(t, res[9].Err, "amount")

	after := b.rowCounts(t)
	assert.Equal(t, [3]int{before[0] + 2, before[1] + 1, before[2] + 2}, after, "two applied, one quarantined, nothing for the rest")
	assert.Equal(t, recovery.Counts{recovery.AlreadyApplied: 1, recovery.Applied: 2, recovery.Conflict: 1, recovery.Invalid: 6, recovery.Failed: 1}, sum.Counts)
	assert.Equal(t, 11, sum.Read)
	assert.False(t, sum.Interrupted)
	assert.False(t, sum.StartedAt.IsZero())
	assert.False(t, sum.FinishedAt.Before(sum.StartedAt))
	assert.Equal(t, 1, sum.Conflicts())
	assert.Equal(t, 7, sum.Problems())
}

func (b bundle) detectedOperator(t *testing.T, id int64) string {
	t.Helper()
	var op *string
	err := b.pool.QueryRow(b.ctx, "SELECT to_jsonb(q) ->> 'detected_operator' FROM idem.quarantine q WHERE id = $1", id).Scan(&op)
	require.NoError(t, err)
	if op == nil {
		return ""
	}
	return *op
}

func TestResolveSingle(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	r := &recovery.Resolver{Pool: b.pool, Config: recovery.Config{Operator: "ada"}}
	one := func(req recovery.Request) recovery.Result {
		var got []recovery.Result
		sum, err := r.Run(b.ctx, recovery.Single(req), func(res recovery.Result) error { got = append(got, res); return nil })
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, 1, sum.Counts.Total())
		return got[0]
	}
	req := recovery.Request{Tenant: "acme", OperationID: "single", Class: "demo.transfer",
		Payload: []byte(`{"from":"alice","to":"bob","amount":5,"currency":"EUR"}`), Transport: []byte(`{"topic":"payments"}`)}
	first := one(req)
	assert.Equal(t, recovery.Applied, first.Outcome)
	assert.Equal(t, 0, first.Line)
	again := one(req)
	assert.Equal(t, recovery.AlreadyApplied, again.Outcome)
	assert.JSONEq(t, string(first.Response), string(again.Response))
	req.Payload = []byte(`{"from":"alice","to":"bob","amount":6,"currency":"EUR"}`)
	assert.Equal(t, recovery.Conflict, one(req).Outcome)
	req.Payload = []byte(`{"amount": 1.0000000000000000001}`)
	assert.Equal(t, recovery.Invalid, one(req).Outcome)
	assert.Equal(t, 1, b.count(t, "SELECT count(*) FROM demo.posting"))
	assert.Equal(t, 1, b.count(t, "SELECT count(*) FROM idem.inbox WHERE transport ->> 'topic' = 'payments'"))
}

func TestDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	input, _, _ := fixture(t, b)
	before := b.rowCounts(t)
	for _, batch := range []int{1, 2, 5000} {
		sum, res, err := b.resolve(t, recovery.Config{DryRun: true, BatchSize: batch, Concurrency: 3}, input)
		require.NoError(t, err)
		assert.Equal(t, []recovery.Outcome{recovery.AlreadyApplied, recovery.WouldApply, recovery.WouldConflict,
			recovery.Invalid, recovery.Invalid, recovery.Invalid, recovery.Invalid, recovery.Invalid, recovery.Invalid,
			recovery.WouldApply, recovery.WouldApply}, outcomes(res), "batch size %d", batch)
		assert.Equal(t, res[0].IncomingHash, res[0].StoredHash)
		assert.NotEqual(t, res[2].IncomingHash, res[2].StoredHash)
		assert.NotEmpty(t, res[2].StoredHash)
		assert.Zero(t, res[2].QuarantineID)
		assert.True(t, sum.DryRun)
	}
	assert.Equal(t, before, b.rowCounts(t), "a dry run writes nothing")
}

func TestDryRunManyBatchesInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	var in strings.Builder
	const n = 500
	for i := range n {
		if i%3 == 0 {
			_, err := idem.Execute(b.ctx, b.app, transfer("t", fmt.Sprint("op-", i), i+1))
			require.NoError(t, err)
		}
		amount := i + 1
		if i%9 == 0 {
			amount++ // conflicts with the applied one
		}
		fmt.Fprintln(&in, line("t", fmt.Sprint("op-", i), amount))
	}
	before := b.rowCounts(t)
	sum, res, err := b.resolve(t, recovery.Config{DryRun: true, BatchSize: 7, Concurrency: 3, Window: 50}, in.String())
	require.NoError(t, err)
	require.Len(t, res, n)
	for i, r := range res {
		want := recovery.WouldApply
		switch {
		case i%9 == 0:
			want = recovery.WouldConflict
		case i%3 == 0:
			want = recovery.AlreadyApplied
		}
		require.Equal(t, i+1, r.Line)
		require.Equal(t, want, r.Outcome, "line %d", i+1)
	}
	assert.Equal(t, n, sum.Counts.Total())
	assert.Equal(t, before, b.rowCounts(t))
}

func TestEmptyAndOnlyBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	for _, dry := range []bool{false, true} {
		sum, res, err := b.resolve(t, recovery.Config{DryRun: dry}, "")
		require.NoError(t, err)
		assert.Empty(t, res)
		assert.True(t, sum.Converged())
		assert.Zero(t, sum.Read)

		sum, res, err = b.resolve(t, recovery.Config{DryRun: dry}, "\n  \n{\n[]\n\"x\"\n{\"tenant\":1}\n")
		require.NoError(t, err)
		assert.Equal(t, []recovery.Outcome{recovery.Invalid, recovery.Invalid, recovery.Invalid, recovery.Invalid}, outcomes(res))
		assert.Equal(t, 4, sum.Problems())
		assert.False(t, sum.Converged())
	}
	assert.Equal(t, [3]int{0, 0, 0}, b.rowCounts(t))
}

// Two resolvers on the same input at once: the primary key settles every
// identity, so each is applied exactly once across both runs.
func TestTwoRunsSameInputApplyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	other, err := db.Open(b.ctx, b.dsn, db.Options{MaxConns: 4})
	require.NoError(t, err)
	defer other.Close()
	var in strings.Builder
	const n = 300
	for i := range n {
		fmt.Fprintln(&in, line("t", fmt.Sprint("op-", i), i+1))
	}
	var wg sync.WaitGroup
	sums := make([]recovery.RunSummary, 2)
	errs := make([]error, 2)
	for k, pool := range []*pgxpool.Pool{b.pool, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &recovery.Resolver{Pool: pool, Config: recovery.Config{Concurrency: 3, Operator: fmt.Sprint("op", k)}}
			sums[k], errs[k] = r.Run(b.ctx, recovery.NDJSON(strings.NewReader(in.String()), 1<<20), func(recovery.Result) error { return nil })
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	assert.Equal(t, n, sums[0].Counts[recovery.Applied]+sums[1].Counts[recovery.Applied], "applied exactly once in all")
	assert.Equal(t, n, sums[0].Counts[recovery.AlreadyApplied]+sums[1].Counts[recovery.AlreadyApplied])
	assert.Equal(t, n, b.count(t, "SELECT count(*) FROM demo.posting"))
	assert.Equal(t, n, b.count(t, "SELECT count(DISTINCT operation_id) FROM demo.posting"))
}

// A first attempt still open when resolve runs the same identity: resolve
// waits on the primary key, then reports what the first attempt did.
func TestLiveFirstAttempt(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			t.Parallel()
			b := setup(t, 4)
			tx, err := b.app.Begin(b.ctx) // the service's attempt
			require.NoError(t, err)
			defer tx.Rollback(context.Background())
			first, err := idem.Execute(b.ctx, tx, transfer("acme", "live", 42))
			require.NoError(t, err)
			require.Equal(t, idem.Applied, first.Outcome)

			type outcome struct {
				res []recovery.Result
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				_, res, err := b.resolve(t, recovery.Config{}, line("acme", "live", 42))
				done <- outcome{res, err}
			}()
			// resolve must be waiting on the open attempt, not answering.
			require.Eventually(t, func() bool {
				return b.count(t, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'") == 1
			}, 10*time.Second, 20*time.Millisecond)
			select {
			case <-done:
				t.Fatal("resolve answered while the first attempt was still open")
			default:
			}
			if commit {
				require.NoError(t, tx.Commit(b.ctx))
			} else {
				require.NoError(t, tx.Rollback(b.ctx))
			}
			got := <-done
			require.NoError(t, got.err)
			require.Len(t, got.res, 1)
			if commit {
				assert.Equal(t, recovery.AlreadyApplied, got.res[0].Outcome)
				assert.JSONEq(t, string(first.Response), string(got.res[0].Response), "the first attempt's response")
			} else {
				assert.Equal(t, recovery.Applied, got.res[0].Outcome)
				assert.NotEqual(t, string(first.Response), string(got.res[0].Response))
			}
			assert.Equal(t, 1, b.count(t, "SELECT count(*) FROM demo.posting"))
		})
	}
}

// A read-only session on the primary is refused before anything, with
// nothing concluded and nothing written.
func TestReadOnlySessionRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	input, _, _ := fixture(t, b)
	before := b.rowCounts(t)
	u, err := url.Parse(b.dsn)
	require.NoError(t, err)
	q := u.Query()
	q.Set("options", "-c default_transaction_read_only=on")
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads + literally
	ro, err := db.Open(b.ctx, u.String(), db.Options{MaxConns: 3})
	require.NoError(t, err)
	defer ro.Close()
	for _, dry := range []bool{false, true} {
		recorded := false
		r := &recovery.Resolver{Pool: ro, Config: recovery.Config{DryRun: dry, Operator: "ada",
			RecordRun: func(context.Context, recovery.RunSummary) error { recorded = true; return nil }}}
		emitted := 0
		sum, err := r.Run(b.ctx, recovery.NDJSON(strings.NewReader(input), 1<<20), func(recovery.Result) error { emitted++; return nil })
		require.ErrorIs(t, err, recovery.ErrNotPrimary)
		var np *recovery.NotPrimaryError
		require.ErrorAs(t, err, &np)
		assert.True(t, np.ReadOnly)
		assert.False(t, np.InRecovery)
		assert.Contains(t, err.Error(), "target_session_attrs=read-write")
		assert.NotContains(t, err.Error(), "\n")
		assert.Zero(t, emitted, "nothing concluded")
		assert.Zero(t, sum.Read)
		assert.False(t, recorded, "a refused run did nothing to record")
	}
	assert.Equal(t, before, b.rowCounts(t))
}

// Cancelling (what Ctrl-C does) stops reading; what was started finishes
// whole; running the same input again applies the rest and reports the first
// part already applied.
func TestInterruptThenRerun(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	var in strings.Builder
	const n = 400
	for i := range n {
		fmt.Fprintln(&in, line("t", fmt.Sprint("op-", i), i+1))
	}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	var records []recovery.RunSummary
	r := &recovery.Resolver{Pool: b.pool, Config: recovery.Config{Concurrency: 3, MaxRate: 400, Operator: "ada", Window: 200,
		RecordRun: func(_ context.Context, s recovery.RunSummary) error { records = append(records, s); return nil }}}
	emitted := 0
	sum, err := r.Run(ctx, recovery.NDJSON(strings.NewReader(in.String()), 1<<20), func(res recovery.Result) error {
		emitted++
		if emitted == 50 {
			cancel()
		}
		return nil
	})
	require.NoError(t, err)
	assert.True(t, sum.Interrupted)
	first := sum.Counts[recovery.Applied]
	assert.GreaterOrEqual(t, first, 50)
	assert.Less(t, first, n)
	assert.Equal(t, first, sum.Counts.Total(), "everything answered was applied")
	assert.Equal(t, first, b.count(t, "SELECT count(*) FROM demo.posting"), "nothing half done, nothing unreported")
	assert.Equal(t, first, b.count(t, "SELECT count(*) FROM idem.inbox"))
	require.Len(t, records, 1, "an interrupted run is recorded too")
	assert.True(t, records[0].Interrupted)

	sum, res, err := b.resolve(t, recovery.Config{Concurrency: 3}, in.String())
	require.NoError(t, err)
	assert.False(t, sum.Interrupted)
	assert.Equal(t, recovery.Counts{recovery.AlreadyApplied: first, recovery.Applied: n - first}, sum.Counts)
	assert.Len(t, res, n)
	assert.Equal(t, n, b.count(t, "SELECT count(*) FROM demo.posting"))
}

func TestNDJSONParsing(t *testing.T) {
	t.Parallel()
	good := `{"tenant":"a\/b","operation_id":"\ud83d\ude00 op","class":"demo.transfer","payload":[1, {"x": "y"}],"transport":{"offset":7}}`
	long := `{"tenant":"t","operation_id":"o","class":"c","payload":"` + strings.Repeat("x", 300) + `"}`
	input := strings.Join([]string{good, "", "  \r", long, good + "\r", `{"tenant":"t","operation_id":"o","class":"c","payload":{},"transport":null}`}, "\n")
	src := recovery.NDJSON(strings.NewReader(input), 200)
	var items []recovery.Item
	for {
		it, err := src.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		items = append(items, it)
	}
	require.Len(t, items, 4)
	assert.NoError(t, items[0].Invalid)
	assert.Equal(t, 1, items[0].Line)
	assert.Equal(t, "a/b", items[0].Request.Tenant)
	assert.Equal(t, "😀 op", items[0].Request.OperationID)
	assert.Equal(t, `[1, {"x": "y"}]`, string(items[0].Request.Payload), "the payload is kept as written, for hashing")
	assert.Equal(t, `{"offset":7}`, string(items[0].Request.Transport))
	assert.Equal(t, 4, items[1].Line)
	assert.ErrorIs(t, items[1].Invalid, recovery.ErrInvalidLine)
	assert.ErrorContains(t, items[1].Invalid, "longer than 200 bytes")
	assert.Equal(t, 5, items[2].Line, "reading goes on after a line that is too long")
	assert.NoError(t, items[2].Invalid)
	assert.NoError(t, items[3].Invalid, "the last line needs no newline")
	assert.Nil(t, items[3].Request.Transport)
}

func TestNDJSONBadLines(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ line, want string }{
		{`nope`, "not JSON"},
		{`[1]`, "want a JSON object, got an array"},
		{`{"tenant":"t","operation_id":"o","class":"c"`, "not JSON"},
		{`{"tenant":"t","operation_id":"o","class":"c","payload":{}} {}`, "more than one JSON value"},
		{`{"tenant":"t","tenant":"u","operation_id":"o","class":"c","payload":{}}`, "duplicate"},
		{`{"tenant":7,"operation_id":"o","class":"c","payload":{}}`, "tenant must be a string, got a number"},
		{`{"operation_id":"o","class":"c","payload":{}}`, "missing field tenant"},
		{`{"tenant":"t","class":"c","payload":{}}`, "missing field operation_id"},
		{`{"tenant":"t","operation_id":"o","payload":{}}`, "missing field class"},
		{`{"tenant":"t","operation_id":"o","class":"c"}`, "missing field payload"},
		{`{"tenant":"t","operation_id":"o","class":"c","payload":null}`, "payload is null"},
		{`{"tenant":"t","operation_id":"o","class":"c","payload":{},"transport":[1]}`, "transport must be an object"},
		{`{"tenant":"t","operation_id":"o","class":"c","payload":{},"operation":"x"}`, `unknown field "operation"`},
		{"{\"tenant\":\"t\xff\",\"operation_id\":\"o\",\"class\":\"c\",\"payload\":{}}", "UTF-8"},
	} {
		it, err := recovery.NDJSON(strings.NewReader(tc.line), 1<<20).Next()
		require.NoError(t, err, tc.line)
		require.Error(t, it.Invalid, tc.line)
		assert.ErrorIs(t, it.Invalid, recovery.ErrInvalidLine)
		assert.Contains(t, it.Invalid.Error(), tc.want, tc.line)
		assert.NotContains(t, it.Invalid.Error(), "\n")
	}
}

// The NDJSON reader holds one line at a time, whatever the input size.
func TestNDJSONStreams(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	src := recovery.NDJSON(pr, 1<<20)
	go func() {
		fmt.Fprintln(pw, line("t", "first", 1))
		// The writer blocks here until the reader has taken the first line.
		fmt.Fprintln(pw, line("t", "second", 1))
		pw.Close()
	}()
	it, err := src.Next()
	require.NoError(t, err)
	assert.Equal(t, "first", it.Request.OperationID)
	it, err = src.Next()
	require.NoError(t, err)
	assert.Equal(t, "second", it.Request.OperationID)
	_, err = src.Next()
	assert.Equal(t, io.EOF, err)
	_ = bytes.MinRead
}

// A server that stops being writable in the middle of a run (a failover
// demoting it): the check inside each transaction refuses, the run stops with
// ErrNotPrimary, and every operation reported applied is committed, nothing
// else.
func TestRefusedMidRun(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	r := &recovery.Resolver{Pool: b.pool, Config: recovery.Config{Concurrency: 3, Operator: "ada"}}
	// Connections opened from now on are read-only; the pool's open one is not,
	// so the check before the run passes and the ones in the transactions refuse.
	readOnlyFromNowOn(t, b)
	var in strings.Builder
	for i := range 200 {
		fmt.Fprintln(&in, line("t", fmt.Sprint("op-", i), i+1))
	}
	var res []recovery.Result
	sum, err := r.Run(b.ctx, recovery.NDJSON(strings.NewReader(in.String()), 1<<20), func(r recovery.Result) error { res = append(res, r); return nil })
	require.ErrorIs(t, err, recovery.ErrNotPrimary)
	var np *recovery.NotPrimaryError
	require.ErrorAs(t, err, &np)
	assert.True(t, np.ReadOnly)
	assert.Less(t, len(res), 200)
	for _, r := range res {
		assert.Equal(t, recovery.Applied, r.Outcome)
	}
	assert.Equal(t, len(res), sum.Counts.Total())
	assert.Equal(t, len(res), b.count(t, "SELECT count(*) FROM demo.posting"), "every reported operation committed, nothing else")
}

// readOnlyFromNowOn makes the connections opened to b's database from now on
// read-only, as a demoted primary's are. Altering a database is the owner's
// or a superuser's act, not an operator's: the test server's superuser does it.
func readOnlyFromNowOn(t *testing.T, b bundle) {
	t.Helper()
	var name string
	require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT current_database()").Scan(&name))
	dbtest.Admin(t, b.dsn, fmt.Sprintf("ALTER DATABASE %q SET default_transaction_read_only = on", name))
}

// idem.assert_primary is the check inside each transaction.
func TestAssertPrimaryInTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer tx.Rollback(b.ctx)
	_, err = tx.Exec(b.ctx, "SELECT idem.assert_primary('ada')")
	require.NoError(t, err)
	var op string
	require.NoError(t, tx.QueryRow(b.ctx, "SELECT current_setting('idem.operator')").Scan(&op))
	assert.Equal(t, "ada", op)
	require.NoError(t, tx.Rollback(b.ctx))

	tx, err = b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer tx.Rollback(b.ctx)
	_, err = tx.Exec(b.ctx, "SET TRANSACTION READ ONLY")
	require.NoError(t, err)
	_, err = tx.Exec(b.ctx, "SELECT idem.assert_primary('ada')")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "IX202", pgErr.Code)
	assert.Contains(t, pgErr.Hint, "target_session_attrs=read-write")
}

// A rerun is answered from batched lookups for the identities already there
// (the saved response, no transaction), and by the protocol for the rest:
// new identities, conflicts, and later lines of an identity within one group
// (the earlier line changes what is there). Whatever the grouping, the
// answers are the protocol's, line by line, and the dry run predicted them.
func TestRerunFromLookups(t *testing.T) {
	t.Parallel()
	b := setup(t, 6)
	const n = 600
	var first strings.Builder
	for i := range n {
		fmt.Fprintln(&first, line("t", fmt.Sprint("op-", i), i+1))
	}
	_, applied, err := b.resolve(t, recovery.Config{Concurrency: 2}, first.String())
	require.NoError(t, err)
	saved := map[string]string{}
	for _, r := range applied {
		require.Equal(t, recovery.Applied, r.Outcome)
		saved[r.OperationID] = string(r.Response)
	}

	// The rerun: every applied line, then new ones; op-7 again with another
	// amount; new-3 twice with its payload and once with another, in a row
	// (one group).
	var in strings.Builder
	var want []recovery.Outcome
	add := func(tenant, op string, amount int, o recovery.Outcome) {
		fmt.Fprintln(&in, line(tenant, op, amount))
		want = append(want, o)
	}
	for i := range n {
		add("t", fmt.Sprint("op-", i), i+1, recovery.AlreadyApplied)
	}
	for i := range 20 {
		o := recovery.Applied
		if i == 3 {
			o = recovery.Conflict // the input holds new-3 with two payloads
		}
		add("t", fmt.Sprint("new-", i), i+1, o)
	}
	add("t", "op-7", 9999, recovery.Conflict)
	add("t", "new-3", 4, recovery.Conflict)
	add("t", "new-3", 5, recovery.Conflict)
	for i := range 100 {
		add("t", fmt.Sprint("op-", i), i+1, recovery.AlreadyApplied)
	}

	_, predicted, err := b.resolve(t, recovery.Config{Concurrency: 3, DryRun: true}, in.String())
	require.NoError(t, err)
	for i, o := range outcomes(predicted) {
		real := map[recovery.Outcome]recovery.Outcome{recovery.WouldApply: recovery.Applied, recovery.WouldConflict: recovery.Conflict}[o]
		if real == "" {
			real = o
		}
		require.Equal(t, want[i], real, "dry run, line %d", i+1)
	}
	for _, conc := range []int{1, 4} {
		sum, res, err := b.resolve(t, recovery.Config{Concurrency: conc}, in.String())
		require.NoError(t, err)
		require.Len(t, res, len(want))
		for i, r := range res {
			o := want[i]
			if conc == 4 && o == recovery.Applied {
				o = recovery.AlreadyApplied // applied by the first of these runs
			}
			require.Equal(t, o, r.Outcome, "concurrency %d, line %d: %v", conc, r.Line, r.Err)
			if r.Outcome == recovery.AlreadyApplied && strings.HasPrefix(r.OperationID, "op-") {
				assert.JSONEq(t, saved[r.OperationID], string(r.Response), "line %d: the saved response", r.Line)
			}
		}
		assert.False(t, sum.Interrupted)
	}
	assert.Equal(t, n+19, b.count(t, "SELECT count(*) FROM demo.posting"), "each operation once, none of new-3's payloads")
	assert.Equal(t, 1, b.count(t, "SELECT count(*) FROM idem.quarantine"), "one record per conflicting identity and payload the primary holds")
}
