package reconcile_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/reconcile"
)

// storedOp is an operation the inbox holds, as the filters' model sees it.
type storedOp struct {
	tenant, op, class string
	amount            int
	created           time.Time
}

var (
	filterTenants = []string{"acme", "acme2", "globex"}
	filterClasses = []string{"demo.transfer", "pay.charge", "pay.refund"}
)

// inboxData registers two more classes and loads, as the schema owner, n
// operations per tenant and class whose operation ids repeat across tenants
// and classes (o-1 of acme and o-1 of globex), created over six days.
func inboxData(f *fixture, rnd *rand.Rand, n int) map[string]storedOp {
	f.t.Helper()
	dbtest.RegisterAppClass(f.t, f.dsn, "pay.charge", "forever")
	dbtest.RegisterAppClass(f.t, f.dsn, "pay.refund", "horizon")
	require.NoError(f.t, dbtest.Owner(f.dsn, "SELECT idem.inbox_body_ensure((now() - interval '8 days')::date, (now() + interval '1 day')::date)"))
	ops := map[string]storedOp{}
	var tenants, opIDs, classes, payloads []string
	var created []time.Time
	base := time.Now().Add(-6 * 24 * time.Hour).Truncate(time.Microsecond)
	for _, tenant := range filterTenants {
		for i := 0; i < 3*n; i++ {
			o := storedOp{tenant: tenant, op: fmt.Sprintf("o-%d", rnd.IntN(5*n)), class: filterClasses[rnd.IntN(3)],
				amount: rnd.IntN(1000), created: base.Add(time.Duration(rnd.Int64N(int64(6 * 24 * time.Hour))))}
			if _, dup := ops[o.tenant+"/"+o.op]; dup {
				continue
			}
			ops[o.tenant+"/"+o.op] = o
			tenants, opIDs, classes, created = append(tenants, o.tenant), append(opIDs, o.op), append(classes, o.class), append(created, o.created)
			payloads = append(payloads, fmt.Sprintf(`{"amount":%d,"currency":"EUR"}`, o.amount))
		}
	}
	require.NoError(f.t, dbtest.Owner(f.dsn, `
		WITH rows AS (
		    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) AS r(t, o, c, p, at)
		), ident AS (
		    INSERT INTO idem.identity (tenant_id, operation_id, op_class, payload_digest, created_at)
		    SELECT t, o, c, sha256(convert_to(p, 'UTF8')), at FROM rows
		    RETURNING 1
		)
		INSERT INTO idem.inbox_body (tenant_id, operation_id, created_at, op_class, payload, response)
		SELECT t, o, at, c, p, '{"ok":true}' FROM rows`, tenants, opIDs, classes, payloads, created))
	return ops
}

// reconcileModel is what reconcile must find: for each report line, its
// identity's operation compared (wherever it was created), and each
// operation of the window (the class, the tenant when --tenant is given,
// created in [since, until)) that the report does not hold.
func reconcileModel(ops map[string]storedOp, m reconcile.Mapping, since, until *time.Time, report map[string]int) []string {
	var out []string
	for key, amount := range report {
		o, ok := ops[key]
		switch {
		case !ok:
			out = append(out, "missing_in_inbox "+key)
		case o.class != m.Class || o.amount != amount:
			out = append(out, "mismatch "+key)
		default:
			out = append(out, "matched "+key)
		}
	}
	for key, o := range ops {
		if _, inReport := report[key]; inReport || o.class != m.Class || (m.Tenant != "" && o.tenant != m.Tenant) {
			continue
		}
		if (since == nil || !o.created.Before(*since)) && (until == nil || o.created.Before(*until)) {
			out = append(out, "missing_in_report "+key)
		}
	}
	slices.Sort(out)
	return out
}

// TestReconcileFiltersMatchModel compares reconcile's findings and its
// --emit-resolve batch with a plain model of --class, --tenant, --since and
// --until, over random operations of three tenants and three classes loaded
// once, and random reports: every combination of the optional filters (--class
// is required) with random values (rapid).
func TestReconcileFiltersMatchModel(t *testing.T) {
	f := setup(t)
	seed := time.Now().UnixNano()
	t.Logf("data seed %d", seed)
	rnd := rand.New(rand.NewPCG(uint64(seed), 0))
	ops := inboxData(f, rnd, 12)
	var keys []string
	var stamps []time.Time
	for k, o := range ops {
		keys = append(keys, k)
		stamps = append(stamps, o.created, o.created.Add(time.Microsecond))
	}
	slices.Sort(keys)
	slices.SortFunc(stamps, time.Time.Compare)
	seen := map[int]bool{}
	prop := func(rt *rapid.T) {
		m := reconcile.Mapping{Class: rapid.SampledFrom(filterClasses).Draw(rt, "class"), Compare: "/amount=amount_minor"}
		mask := rapid.IntRange(0, 7).Draw(rt, "flags")
		seen[mask] = true
		var since, until *time.Time
		if mask&1 != 0 {
			m.Tenant = rapid.SampledFrom(filterTenants).Draw(rt, "tenant")
		}
		if mask&2 != 0 {
			s := rapid.SampledFrom(stamps).Draw(rt, "since")
			since, m.Since = &s, s.UTC().Format(time.RFC3339Nano)
		}
		if mask&4 != 0 {
			u := rapid.SampledFrom(stamps).Draw(rt, "until")
			if since != nil && !since.Before(u) {
				u = since.Add(time.Hour)
			}
			until, m.Until = &u, u.UTC().Format(time.RFC3339Nano)
		}
		// The report: random identities (of the fixed tenant when --tenant
		// is given), some with the stored amount, some not, some unknown.
		report := map[string]int{}
		lines := []string{"merchant,reference,amount_minor"}
		m.Key = "tenant=merchant,operation_id=reference"
		if m.Tenant != "" {
			lines[0], m.Key = "reference,amount_minor", "operation_id=reference"
		}
		for i, n := 0, rapid.IntRange(1, 25).Draw(rt, "report lines"); i < n; i++ {
			key := rapid.SampledFrom(keys).Draw(rt, "line")
			tenant, op, _ := strings.Cut(key, "/")
			if rapid.IntRange(0, 5).Draw(rt, "unknown") == 0 {
				op += "-x"
			}
			if m.Tenant != "" {
				tenant = m.Tenant
			}
			key = tenant + "/" + op
			if _, dup := report[key]; dup {
				continue
			}
			amount := ops[key].amount + rapid.IntRange(0, 1).Draw(rt, "amount off")
			report[key] = amount
			if m.Tenant != "" {
				lines = append(lines, fmt.Sprintf("%s,%d", op, amount))
			} else {
				lines = append(lines, fmt.Sprintf("%s,%s,%d", tenant, op, amount))
			}
		}
		m.Report = f.file("report.csv", lines...)
		emit := filepath.Join(f.dir, "emit.ndjson")
		_, found, err := f.run(reconcile.Config{Mapping: m, EmitResolve: emit, Overwrite: true})
		require.NoError(rt, err)
		var got, emitted, wantEmitted []string
		for _, x := range found {
			got = append(got, string(x.Status)+" "+x.Tenant+"/"+x.OperationID)
		}
		slices.Sort(got)
		want := reconcileModel(ops, m, since, until, report)
		if !slices.Equal(want, got) {
			rt.Fatalf("reconcile --class %s --tenant %q --since %q --until %q found\n%v\nthe model\n%v",
				m.Class, m.Tenant, m.Since, m.Until, got, want)
		}
		batch, err := os.ReadFile(emit)
		require.NoError(rt, err)
		for _, req := range readBatch(f.t, batch) {
			emitted = append(emitted, "missing_in_report "+req.Tenant+"/"+req.OperationID)
		}
		for _, w := range want {
			if strings.HasPrefix(w, "missing_in_report ") {
				wantEmitted = append(wantEmitted, w)
			}
		}
		slices.Sort(emitted)
		if !slices.Equal(wantEmitted, emitted) {
			rt.Fatalf("reconcile --class %s --tenant %q --since %q --until %q emitted\n%v\nthe model\n%v",
				m.Class, m.Tenant, m.Since, m.Until, emitted, wantEmitted)
		}
	}
	for round := 0; round < 2; round++ {
		rapid.Check(t, prop)
	}
	require.Len(t, seen, 8, "every combination of --tenant, --since and --until ran")
}

// TestIntakeFiltersMatchModel compares intake's batch with a plain model of
// --source and --class: two archive sources of random messages (three
// tenants, payloads present, changed or absent in the inbox), every
// combination of source and class (rapid), the batch holding exactly the
// chosen source's messages the inbox does not hold with that class and
// payload.
func TestIntakeFiltersMatchModel(t *testing.T) {
	f := setup(t)
	seed := time.Now().UnixNano()
	t.Logf("data seed %d", seed)
	rnd := rand.New(rand.NewPCG(uint64(seed), 0))
	ops := inboxData(f, rnd, 8)
	var keys []string
	for k := range ops {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	type message struct {
		key    string
		amount int
	}
	sources := map[string][]message{}
	for _, name := range []string{"archive-a", "archive-b"} {
		var lines []string
		used := map[string]bool{}
		for i := 0; i < 40; i++ {
			key := keys[rnd.IntN(len(keys))]
			if rnd.IntN(4) == 0 {
				key += "-new"
			}
			if used[key] {
				continue
			}
			used[key] = true
			msg := message{key: key, amount: ops[key].amount + rnd.IntN(2)}
			tenant, op, _ := strings.Cut(key, "/")
			lines = append(lines, fmt.Sprintf(`{"tenant":%q,"operation_id":%q,"ts":"2026-11-01T10:00:00Z","payload":{"amount":%d,"currency":"EUR"}}`,
				tenant, op, msg.amount))
			sources[name] = append(sources[name], msg)
		}
		f.file(filepath.Join(name, "2026-11-01.ndjson"), lines...)
		require.NoError(t, horizon.AddSource(f.ctx, f.pool, horizon.Source{Name: name, Kind: horizon.KindArchive,
			Config: horizon.SourceConfig{Dir: filepath.Join(f.dir, name)}}, "alice"))
	}
	seen := map[string]bool{}
	prop := func(rt *rapid.T) {
		source := rapid.SampledFrom([]string{"archive-a", "archive-b"}).Draw(rt, "source")
		class := rapid.SampledFrom(filterClasses).Draw(rt, "class")
		seen[source+" "+class] = true
		var buf bytes.Buffer
		_, err := reconcile.Intake(f.ctx, f.pool, reconcile.IntakeConfig{Source: source, Class: class, Operator: "alice"},
			reconcile.NewBatchWriter(&buf))
		require.NoError(rt, err)
		var got, want []string
		for _, req := range readBatch(f.t, buf.Bytes()) {
			got = append(got, req.Class+" "+req.Tenant+"/"+req.OperationID)
		}
		for _, msg := range sources[source] {
			if o, ok := ops[msg.key]; !ok || o.class != class || o.amount != msg.amount {
				want = append(want, class+" "+msg.key)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(want, got) {
			rt.Fatalf("intake --source %s --class %s wrote\n%v\nthe model\n%v", source, class, got, want)
		}
	}
	for round := 0; round < 2; round++ {
		rapid.Check(t, prop)
	}
	require.Len(t, seen, 6, "every combination of --source and --class ran")
}
