package recovery_test

import (
	"flag"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/recovery"
	"github.com/idemctl/idemctl/redrive"
)

// atLeastChecks raises rapid's number of checks to n for this test binary,
// unless -rapid.checks asks for more.
func atLeastChecks(t *testing.T, n int) {
	f := flag.Lookup("rapid.checks")
	require.NotNil(t, f, "rapid registers its flags")
	var now int
	fmt.Sscan(f.Value.String(), &now)
	if now < n {
		require.NoError(t, f.Value.Set(fmt.Sprint(n)))
		t.Cleanup(func() { _ = f.Value.Set(fmt.Sprint(now)) })
	}
}

// Classes of the prediction test: a SQL effect (which refuses a transfer to
// the same account), an application-code class re-driven through the
// reference service, one with no re-drive, and one re-driven through a
// service not declared downstream-idempotent.
const (
	predSQL      = "demo.transfer"
	predRedrive  = demo.AppClass
	predNoRun    = "pred.app_norun"
	predNotIdem  = "pred.app_notidem"
	predAccounts = `"from":"a","to":"b"`
)

// The dry run says what the real run does. Random batches (lines of the
// same identity with the same or other payloads, effects that refuse,
// invalid lines, identities already on the primary with the same or another
// payload, application-code classes with and without a re-drive) are run as
// a dry run, then for real against the same database (each case in a tenant
// of its own, so that it starts from the state it set up; the dry run writes
// nothing, which is checked): every line's prediction is its outcome, would_*
// standing for what the real run writes. A prediction may be conditional
// only when the line runs an effect, and only that effect refusing may turn
// it into an error.
func TestDryRunPredictsTheRun(t *testing.T) {
	t.Parallel()
	atLeastChecks(t, 200)
	b := setup(t, 8)
	svc := &demo.Service{Pool: dbtest.PoolAs(t, b.dsn, dbtest.App, 4), Provider: dbtest.PoolAs(t, b.dsn, dbtest.App, 4)}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	_, err := redrive.Set(b.ctx, b.pool, predRedrive, &redrive.Config{Kind: redrive.KindHTTP, URL: srv.URL + "/transfers"}, true, "alice")
	require.NoError(t, err)
	dbtest.RegisterAppClass(t, b.dsn, predNoRun, "forever")
	dbtest.RegisterAppClass(t, b.dsn, predNotIdem, "forever")
	_, err = redrive.Set(b.ctx, b.pool, predNotIdem, &redrive.Config{Kind: redrive.KindHTTP, URL: srv.URL + "/transfers"}, false, "alice")
	require.NoError(t, err)

	var caseNo atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		tenant := fmt.Sprint("pred-", caseNo.Add(1))
		classes := []string{predSQL, predRedrive, predNoRun, predNotIdem}
		nIDs := rapid.IntRange(1, 4).Draw(rt, "identities")
		class := make([]string, nIDs)
		present := make([]bool, nIDs)
		for i := range nIDs {
			class[i] = rapid.SampledFrom(classes).Draw(rt, "class")
			// Already there, with payload variant 0 or 1 (SQL and re-driven classes).
			if class[i] == predSQL || class[i] == predRedrive {
				if v := rapid.IntRange(-1, 1).Draw(rt, "present"); v >= 0 {
					present[i] = true
					id := idem.Identity{TenantID: tenant, OperationID: fmt.Sprint("op-", i)}
					payload := []byte(fmt.Sprintf(`{%s,"amount":%d,"currency":"EUR"}`, predAccounts, 100+v))
					if class[i] == predSQL {
						_, err := idem.Execute(b.ctx, b.app, idem.Command{Identity: id, Class: predSQL, Payload: payload})
						require.NoError(rt, err)
					} else {
						_, err := svc.Transfer(b.ctx, id, payload)
						require.NoError(rt, err)
					}
				}
			}
		}
		type lineModel struct {
			id       int // -1: invalid
			variant  int
			fails    bool // the line's effect refuses (a transfer to the same account)
			ambiguos bool
		}
		nLines := rapid.IntRange(1, 8).Draw(rt, "lines")
		var input strings.Builder
		models := make([]lineModel, nLines)
		payloads := map[int]map[int]bool{}
		for k := range nLines {
			id := rapid.IntRange(-1, nIDs-1).Draw(rt, "line identity")
			if id < 0 {
				models[k] = lineModel{id: -1}
				fmt.Fprintf(&input, `{"tenant":%q,"operation_id":"op-0","class":%q}`+"\n", tenant, predSQL) // no payload
				continue
			}
			v := rapid.IntRange(0, 2).Draw(rt, "payload variant")
			accounts := predAccounts
			m := lineModel{id: id, variant: v}
			if v == 2 && class[id] == predSQL {
				accounts, m.fails = `"from":"a","to":"a"`, true
			}
			models[k] = m
			if payloads[id] == nil {
				payloads[id] = map[int]bool{}
			}
			payloads[id][v] = true
			fmt.Fprintf(&input, `{"tenant":%q,"operation_id":"op-%d","class":%q,"payload":{%s,"amount":%d,"currency":"EUR"}}`+"\n",
				tenant, id, class[id], accounts, 100+v)
		}
		for k := range models {
			if models[k].id >= 0 {
				models[k].ambiguos = len(payloads[models[k].id]) > 1
			}
		}

		before := tenantRows(rt, b, tenant)
		dryCfg := recovery.Config{DryRun: true, Concurrency: rapid.IntRange(1, 3).Draw(rt, "dry concurrency"),
			BatchSize: rapid.IntRange(1, 4).Draw(rt, "batch size")}
		_, predicted, err := b.resolve(t, dryCfg, input.String())
		require.NoError(rt, err)
		require.Equal(rt, before, tenantRows(rt, b, tenant), "a dry run writes nothing")
		_, got, err := b.resolve(t, recovery.Config{Concurrency: rapid.IntRange(1, 4).Draw(rt, "concurrency")}, input.String())
		require.NoError(rt, err)
		require.Len(rt, got, nLines)
		require.Len(rt, predicted, nLines)

		for k, m := range models {
			p, o := predicted[k], got[k]
			require.Equal(rt, p.Line, o.Line)
			where := fmt.Sprintf("line %d (%+v) of\n%s\npredicted %s %q (%v), got %s %q (%v)", o.Line, m, input.String(),
				p.Outcome, p.Note, p.Err, o.Outcome, o.Note, o.Err)
			runsEffect := m.id >= 0 && !present[m.id] && !m.ambiguos && (class[m.id] == predSQL || class[m.id] == predRedrive)
			if p.Conditional {
				require.True(rt, runsEffect, "conditional, although the line runs no effect: %s", where)
			}
			want := map[recovery.Outcome]recovery.Outcome{recovery.WouldApply: recovery.Applied,
				recovery.WouldRedrive: recovery.Applied, recovery.WouldConflict: recovery.Conflict}[p.Outcome]
			if want == "" {
				want = p.Outcome
			}
			if p.Conditional && m.fails && o.Outcome == recovery.Failed {
				continue // its own effect refused, as the prediction allowed
			}
			require.Equal(rt, want, o.Outcome, where)
			if m.fails && runsEffect {
				require.True(rt, p.Conditional, "a line whose effect refuses was predicted without condition: %s", where)
			}
			if o.Outcome == recovery.Conflict && o.QuarantineID == 0 {
				require.Equal(rt, p.Note, o.Note, where)
			}
			if o.Outcome == recovery.Failed {
				require.Equal(rt, fmt.Sprint(p.Err), fmt.Sprint(o.Err), where)
			}
		}
	})
}

// tenantRows counts what a run may write for tenant: inbox rows, quarantine
// records, postings and provider charges.
func tenantRows(t require.TestingT, b bundle, tenant string) [4]int {
	var n [4]int
	for i, sql := range []string{
		"SELECT count(*) FROM idem.inbox WHERE tenant_id = $1",
		"SELECT count(*) FROM idem.quarantine WHERE tenant_id = $1",
		"SELECT count(*) FROM demo.posting WHERE tenant_id = $1",
		"SELECT count(*) FROM demo.provider_charge WHERE tenant_id = $1",
	} {
		require.NoError(t, b.pool.QueryRow(b.ctx, sql, tenant).Scan(&n[i]))
	}
	return n
}
