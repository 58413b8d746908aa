package quarantine_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
)

// modelRecord is a quarantine record as the filters' model sees it.
type modelRecord struct {
	id                     int64
	tenant, op             string
	class, incoming        string
	status                 quarantine.Status
	source                 string // the transport's "source", else its "topic", else ""
	fields                 []string
	firstSeen, lastSeen    time.Time
	storedDoc, incomingDoc map[string]any
}

// matches is the plain model of sql/filter.sql.
func (r modelRecord) matches(f quarantine.Filter) bool {
	status := f.Status
	if status == "" {
		status = quarantine.StatusOpen
	}
	switch {
	case status != quarantine.StatusAll && r.status != status,
		f.Tenant != "" && r.tenant != f.Tenant,
		f.Op != "" && r.op != f.Op,
		f.OpPrefix != "" && !strings.HasPrefix(r.op, f.OpPrefix),
		f.Class != "" && r.class != f.Class && r.incoming != f.Class,
		f.Changed != "" && !slices.Contains(r.fields, f.Changed),
		f.Source != "" && r.source != f.Source,
		!f.Since.IsZero() && r.lastSeen.Before(f.Since),
		!f.Until.IsZero() && !r.lastSeen.Before(f.Until):
		return false
	}
	return true
}

// modelList is what list must return, newest activity first.
func modelList(recs []modelRecord, f quarantine.Filter) []int64 {
	var m []modelRecord
	for _, r := range recs {
		if r.matches(f) {
			m = append(m, r)
		}
	}
	slices.SortFunc(m, func(a, b modelRecord) int {
		if c := b.lastSeen.Compare(a.lastSeen); c != 0 {
			return c
		}
		return int(b.id - a.id)
	})
	ids := make([]int64, len(m))
	for i, r := range m {
		ids[i] = r.id
	}
	return ids
}

// quarantineData loads random records spread over tenants, classes,
// operation ids with LIKE's special characters, sources, statuses and times,
// as the schema owner writes them (the guards that keep users from writing
// the table directly are off for the load), and returns them.
func quarantineData(t *testing.T, dsn string, rnd *rand.Rand, n int) []modelRecord {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbtest.As(dsn, dbtest.Superuser))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SET session_replication_role = replica")
	require.NoError(t, err)
	tenants := []string{"acme", "acme2", "Acme", "globex"}
	classes := []string{"demo.transfer", "pay.charge", "pay.refund"}
	ops := []string{"op-1", "op-10", "op-2", "op_1", "op%1", `op\1`, "OP-1", "x-1"}
	transports := []string{`{"source":"mobile"}`, `{"topic":"orders"}`, `{"source":"web","topic":"orders"}`, `{}`, ``}
	keys := []string{"amount", "currency", "to", "a/b"}
	base := time.Now().Add(-10 * 24 * time.Hour).Truncate(time.Second)
	var recs []modelRecord
	for i := 0; i < n; i++ {
		r := modelRecord{tenant: tenants[rnd.IntN(len(tenants))], op: ops[rnd.IntN(len(ops))],
			class: classes[rnd.IntN(len(classes))]}
		r.incoming = r.class
		if rnd.IntN(5) == 0 {
			r.incoming = classes[rnd.IntN(len(classes))]
		}
		r.storedDoc, r.incomingDoc = map[string]any{"n": i}, map[string]any{"n": i}
		for _, k := range keys {
			if rnd.IntN(2) == 0 {
				r.storedDoc[k] = rnd.IntN(3)
			}
			if rnd.IntN(2) == 0 {
				r.incomingDoc[k] = rnd.IntN(3)
			}
			s, sok := r.storedDoc[k]
			in, iok := r.incomingDoc[k]
			if sok != iok || s != in {
				r.fields = append(r.fields, "/"+strings.ReplaceAll(k, "/", "~1"))
			}
		}
		tr := transports[rnd.IntN(len(transports))]
		var trans map[string]string
		if tr != "" {
			require.NoError(t, json.Unmarshal([]byte(tr), &trans))
		}
		r.source = trans["source"]
		if r.source == "" {
			r.source = trans["topic"]
		}
		// Whole minutes, a few seconds apart at most: ties on last_seen happen.
		r.firstSeen = base.Add(time.Duration(rnd.IntN(8*24*60)) * time.Minute)
		r.lastSeen = r.firstSeen.Add(time.Duration(rnd.IntN(3)) * time.Hour)
		r.status = []quarantine.Status{quarantine.StatusOpen, quarantine.StatusOpen, quarantine.StatusRejected,
			quarantine.StatusAccepted}[rnd.IntN(4)]
		stored, _ := json.Marshal(r.storedDoc)
		incoming, _ := json.Marshal(r.incomingDoc)
		var transport any
		if tr != "" {
			transport = tr
		}
		err := conn.QueryRow(ctx, `
			INSERT INTO idem.quarantine (tenant_id, operation_id, op_class, incoming_class, stored_hash, stored_payload,
			    incoming_hash, incoming_payload, incoming_transport, diff, holds_on, first_seen, last_seen, status,
			    decided_at, decided_by, decided_db_user, decision_reason, decision_audit_id, new_operation_id, new_outcome)
			SELECT $1, $2, $3, $4, 'jcs-sha256:' || encode(sha256(convert_to($5, 'UTF8')), 'hex'), $5,
			       'jcs-sha256:' || encode(sha256(convert_to($6, 'UTF8')), 'hex'), $6, $7::jsonb,
			       idem.json_diff($5::jsonb, $6::jsonb), 'body', $8, $9, $10,
			       d.at, d.who, d.who, d.why, d.audit, d.new_op, d.outcome
			FROM (SELECT CASE WHEN $10 <> 'open' THEN $9::timestamptz END AS at,
			             CASE WHEN $10 <> 'open' THEN 'alice' END AS who,
			             CASE WHEN $10 <> 'open' THEN 'test' END AS why,
			             CASE WHEN $10 <> 'open' THEN 1 END AS audit,
			             CASE WHEN $10 = 'accepted' THEN $2 || '-rev2' END AS new_op,
			             CASE WHEN $10 = 'accepted' THEN 'applied' END AS outcome) d
			RETURNING id`,
			r.tenant, r.op, r.class, r.incoming, string(stored), string(incoming), transport,
			r.firstSeen, r.lastSeen, string(r.status)).Scan(&r.id)
		require.NoError(t, err)
		recs = append(recs, r)
	}
	return recs
}

// TestQuarantineFiltersMatchModel compares quarantine list (and its --count),
// groups, the preview of a bulk reject by filter (the set the decision
// decides: both read sql/filter.sql, the decision bounded by the preview's
// max id) and export with a plain model of the filters, over random records
// loaded once: first every combination of the flags once (values from the
// data's seeded generator), then random combinations and values (rapid),
// each also paged through with --after, and an export of a random record.
func TestQuarantineFiltersMatchModel(t *testing.T) {
	b := setup(t, 2)
	seed := time.Now().UnixNano()
	t.Logf("data seed %d", seed)
	rnd := rand.New(rand.NewPCG(uint64(seed), 0))
	recs := quarantineData(t, b.dsn, rnd, 160)
	byID := map[int64]modelRecord{}
	var stamps []time.Time
	for _, r := range recs {
		byID[r.id] = r
		stamps = append(stamps, r.lastSeen, r.lastSeen.Add(time.Microsecond), r.lastSeen.Add(-time.Microsecond))
	}
	// The combinations: tenant, class, changed, source (one bit each), the
	// operation id (none, --op, --op-prefix), since and until.
	const lowFlags = 4
	queries := 0
	prop := func(t *rapid.T) {
		var v quarantine.Filter
		v.Status = rapid.SampledFrom([]quarantine.Status{"", quarantine.StatusOpen, quarantine.StatusRejected,
			quarantine.StatusAccepted, quarantine.StatusAll}).Draw(t, "status")
		v.Tenant = rapid.SampledFrom([]string{"acme", "acme2", "Acme", "globex", "acm", "initech"}).Draw(t, "tenant")
		v.Class = rapid.SampledFrom([]string{"demo.transfer", "pay.charge", "pay.refund", "pay"}).Draw(t, "class")
		v.Changed = rapid.SampledFrom([]string{"/amount", "/currency", "/to", "/a~1b", "/n", "/a"}).Draw(t, "changed")
		v.Source = rapid.SampledFrom([]string{"mobile", "web", "orders", "mob"}).Draw(t, "source")
		v.Op = rapid.SampledFrom([]string{"op-1", "op-10", "op_1", "op%1", `op\1`, "OP-1", "op"}).Draw(t, "op")
		v.OpPrefix = rapid.SampledFrom([]string{"op-1", "op_", "op%", `op\`, "op", "o", "OP", "x"}).Draw(t, "op prefix")
		v.Since = rapid.SampledFrom(stamps).Draw(t, "since")
		v.Until = rapid.SampledFrom(stamps).Draw(t, "until")
		high := rapid.IntRange(0, 3).Draw(t, "since/until")
		low, opMode := rapid.IntRange(0, 1<<lowFlags-1).Draw(t, "flags"), rapid.IntRange(0, 2).Draw(t, "op flag")
		checkFilter(t, b, recs, combine(v, low, opMode, high), rapid.Bool().Draw(t, "by tenant"), rapid.Bool().Draw(t, "by source"))
		queries += 5
		// The same combination page by page, as --after pages.
		if f := combine(v, low, opMode, high); f.Validate() == nil {
			want := modelList(recs, f)
			f.Limit = rapid.IntRange(1, 9).Draw(t, "limit")
			var got []int64
			for {
				page, err := quarantine.List(b.ctx, b.pool, f)
				queries++
				require.NoError(t, err)
				for _, s := range page.Items {
					got = append(got, s.ID)
				}
				if page.Next == nil {
					break
				}
				f.After = page.Next
			}
			if !slices.Equal(want, got) {
				t.Fatalf("filter %s, pages of %d: list returned %v, the model %v", f.Describe(), f.Limit, got, want)
			}
		}
		// Export: the bundle is the record asked for, whatever its tenant.
		id := rapid.SampledFrom(recs).Draw(t, "export").id
		bundle, err := quarantine.Export(b.ctx, b.pool, id, "alice")
		queries++
		require.NoError(t, err)
		r := byID[id]
		got := bundle.Record
		if got.ID != id || got.Tenant != r.tenant || got.OperationID != r.op || got.Class != r.class ||
			got.IncomingClass != r.incoming || got.Status != r.status {
			t.Fatalf("export %d: bundle holds %d %s/%s %s->%s %s, the model %s/%s %s->%s %s", id, got.ID, got.Tenant,
				got.OperationID, got.Class, got.IncomingClass, got.Status, r.tenant, r.op, r.class, r.incoming, r.status)
		}
	}
	// Every combination once, with values drawn from the data's generator,
	// then random ones.
	for high := 0; high < 4; high++ {
		for low := 0; low < 1<<lowFlags; low++ {
			for opMode := 0; opMode < 3; opMode++ {
				f := sweepFilter(rnd, stamps, low, opMode, high)
				checkFilter(t, b, recs, f, rnd.IntN(2) == 0, rnd.IntN(2) == 0)
				queries += 5
			}
		}
	}
	for round := 0; round < 2; round++ {
		rapid.Check(t, prop)
	}
	t.Logf("%d queries", queries)
}

// combine is the filter of one combination of flags (low: tenant, class,
// changed, source; opMode: none, --op, --op-prefix; high: since, until)
// with the values of v.
func combine(v quarantine.Filter, low, opMode, high int) quarantine.Filter {
	f := quarantine.Filter{Status: v.Status, Limit: quarantine.MaxLimit}
	if low&1 != 0 {
		f.Tenant = v.Tenant
	}
	if low&2 != 0 {
		f.Class = v.Class
	}
	if low&4 != 0 {
		f.Changed = v.Changed
	}
	if low&8 != 0 {
		f.Source = v.Source
	}
	switch opMode {
	case 1:
		f.Op = v.Op
	case 2:
		f.OpPrefix = v.OpPrefix
	}
	if high&1 != 0 {
		f.Since = v.Since
	}
	if high&2 != 0 {
		f.Until = v.Until
	}
	return f
}

// sweepFilter draws the values of one combination from rnd.
func sweepFilter(rnd *rand.Rand, stamps []time.Time, low, opMode, high int) quarantine.Filter {
	pick := func(s ...string) string { return s[rnd.IntN(len(s))] }
	v := quarantine.Filter{
		Status:   quarantine.Status(pick("", "open", "rejected", "accepted", "all")),
		Tenant:   pick("acme", "acme2", "Acme", "globex"),
		Class:    pick("demo.transfer", "pay.charge", "pay.refund"),
		Changed:  pick("/amount", "/currency", "/to", "/a~1b"),
		Source:   pick("mobile", "web", "orders"),
		Op:       pick("op-1", "op_1", "op%1", `op\1`),
		OpPrefix: pick("op-1", "op_", "op%", `op\`, "op"),
		Since:    stamps[rnd.IntN(len(stamps))],
		Until:    stamps[rnd.IntN(len(stamps))],
	}
	return combine(v, low, opMode, high)
}

// checkFilter checks list, --count, groups and a bulk reject's preview of f.
func checkFilter(t tb, b bundle, recs []modelRecord, f quarantine.Filter, byTenant, bySource bool) {
	checkList(t, b, recs, f)
	checkGroups(t, b, recs, f, byTenant, bySource)
	checkPreview(t, b, recs, f)
}

// tb is what the checks need of *testing.T and *rapid.T alike.
type tb interface {
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	FailNow()
}

// validity is what Validate must say of f: an error exactly when the model
// cannot apply it.
func checkValid(t tb, f quarantine.Filter, err error) bool {
	invalid := f.Op != "" && f.OpPrefix != "" ||
		!f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until)
	if invalid {
		if !errors.Is(err, quarantine.ErrInvalidFilter) {
			t.Fatalf("filter %s: want ErrInvalidFilter, got %v", f.Describe(), err)
		}
		return false
	}
	require.NoError(t, err, f.Describe())
	return true
}

func checkList(t tb, b bundle, recs []modelRecord, f quarantine.Filter) {
	page, err := quarantine.List(b.ctx, b.pool, f)
	if !checkValid(t, f, err) {
		return
	}
	got := make([]int64, len(page.Items))
	for i, s := range page.Items {
		got[i] = s.ID
	}
	want := modelList(recs, f)
	if !slices.Equal(want, got) {
		t.Fatalf("filter %s: list returned %v, the model %v", f.Describe(), got, want)
	}
	totals, err := quarantine.Count(b.ctx, b.pool, f)
	require.NoError(t, err)
	open := f
	open.Status = quarantine.StatusOpen
	var oldest *time.Time
	for _, r := range recs {
		if r.matches(f) && r.matches(open) && (oldest == nil || r.firstSeen.Before(*oldest)) {
			oldest = &r.firstSeen
		}
	}
	if totals.Matching != int64(len(want)) || (oldest == nil) != (totals.OldestOpen == nil) ||
		(oldest != nil && !oldest.Equal(*totals.OldestOpen)) {
		t.Fatalf("filter %s: --count says %d (oldest open %v), the model %d (%v)", f.Describe(), totals.Matching,
			totals.OldestOpen, len(want), oldest)
	}
}

// groupKey is a group's key as the model builds it.
func groupKey(class, incoming string, fields []string, tenant, source *string) string {
	fs := slices.Clone(fields)
	slices.Sort(fs)
	k := class + " " + incoming + " " + strings.Join(fs, ",")
	if tenant != nil {
		k += " tenant=" + *tenant
	}
	if source != nil {
		k += " source=" + *source
	}
	return k
}

type modelGroup struct {
	n                   int64
	firstSeen, lastSeen time.Time
	example             int64
}

func checkGroups(t tb, b bundle, recs []modelRecord, f quarantine.Filter, byTenant, bySource bool) {
	groups, err := quarantine.Groups(b.ctx, b.pool, quarantine.GroupOptions{Filter: f, Limit: quarantine.MaxLimit,
		By: quarantine.GroupBy{Tenant: byTenant, Source: bySource}})
	open := f
	open.Status = quarantine.StatusOpen
	if !checkValid(t, open, err) {
		return
	}
	want := map[string]*modelGroup{}
	for _, r := range recs {
		if !r.matches(open) {
			continue
		}
		var tenant, source *string
		if byTenant {
			tenant = &r.tenant
		}
		if bySource {
			source = &r.source
		}
		k := groupKey(r.class, r.incoming, r.fields, tenant, source)
		g := want[k]
		if g == nil {
			g = &modelGroup{firstSeen: r.firstSeen, lastSeen: r.lastSeen}
			want[k] = g
		}
		g.n++
		g.example = max(g.example, r.id)
		if r.firstSeen.Before(g.firstSeen) {
			g.firstSeen = r.firstSeen
		}
		if r.lastSeen.After(g.lastSeen) {
			g.lastSeen = r.lastSeen
		}
	}
	got := map[string]modelGroup{}
	for i, g := range groups {
		if i > 0 && g.Count > groups[i-1].Count {
			t.Fatalf("filter %s: groups not largest first", f.Describe())
		}
		got[groupKey(g.Class, g.IncomingClass, g.Fields, g.Tenant, g.Source)] = modelGroup{n: g.Count,
			firstSeen: g.FirstSeen, lastSeen: g.LastSeen, example: g.Example.ID}
	}
	if len(got) != len(want) {
		t.Fatalf("filter %s (by tenant %v, by source %v): %d groups, the model %d:\n%v\n%v", f.Describe(), byTenant,
			bySource, len(got), len(want), got, want)
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || g.n != w.n || !g.firstSeen.Equal(w.firstSeen) || !g.lastSeen.Equal(w.lastSeen) || g.example != w.example {
			t.Fatalf("filter %s: group %q is %+v, the model %+v", f.Describe(), k, g, *w)
		}
	}
}

func checkPreview(t tb, b bundle, recs []modelRecord, f quarantine.Filter) {
	p, err := quarantine.PreviewBulk(b.ctx, b.pool, quarantine.Selection{Filter: f})
	if !f.Narrowed() {
		if !errors.Is(err, quarantine.ErrInvalidFilter) {
			t.Fatalf("a bulk reject with no filter: want ErrInvalidFilter, got %v", err)
		}
		return
	}
	open := f
	open.Status = quarantine.StatusOpen
	if errors.Is(err, quarantine.ErrNothingToDecide) {
		err = nil
	}
	if !checkValid(t, open, err) {
		return
	}
	want := modelList(recs, open)
	if len(want) == 0 {
		if p.Open != 0 {
			t.Fatalf("filter %s: the preview counts %d open records, the model none", f.Describe(), p.Open)
		}
		return
	}
	maxID := slices.Max(want)
	if p.Open != int64(len(want)) || p.MaxID != maxID {
		t.Fatalf("filter %s: the preview counts %d open records up to id %d, the model %d up to %d",
			f.Describe(), p.Open, p.MaxID, len(want), maxID)
	}
	sample := make([]int64, len(p.Sample))
	for i, s := range p.Sample {
		sample[i] = s.ID
	}
	if w := want[:min(len(want), quarantine.SampleSize)]; !slices.Equal(w, sample) {
		t.Fatalf("filter %s: the preview's sample is %v, the model's %v", f.Describe(), sample, w)
	}
}
