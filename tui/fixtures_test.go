package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/quarantine"
	"github.com/idemctl/idemctl/reconcile"
	"github.com/idemctl/idemctl/recovery"
	"github.com/idemctl/idemctl/tui/horizonview"
	"github.com/idemctl/idemctl/tui/reconcileview"
	"github.com/idemctl/idemctl/tui/resolveview"
)

// Fixed data for the golden tests: every value a view shows is fixed here,
// and the clock is fixedNow, so the rendered screens never change by
// themselves.

var fixedNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const fixedDB = "postgres@db-primary.payments.internal:5432/payments_production"

func mustHash(payload string) string {
	_, h, err := idem.Canonicalize([]byte(payload), idem.PayloadLimits{})
	if err != nil {
		panic(err)
	}
	return h
}

const (
	storedPayload   = `{"amount":100,"currency":"EUR","from":"acct-1","to":"acct-2"}`
	incomingPayload = `{"amount":1000,"currency":"EUR","from":"acct-1","memo":"retry","to":"acct-2"}`
)

// fixedQuarantine is a queueview.QuarantineService over fixed records.
type fixedQuarantine struct {
	mu      sync.Mutex
	records map[int64]quarantine.Record
	// failAccept, when set, is the error AcceptAsNew returns.
	failAccept error
}

func newFixedQuarantine() *fixedQuarantine {
	base := quarantine.Record{
		Class: "demo.transfer", IncomingClass: "demo.transfer",
		StoredHash: mustHash(storedPayload), StoredPayload: json.RawMessage(storedPayload),
		StoredResponse: json.RawMessage(`{"posting_id":"5b1f0c7e-0000-4000-8000-000000000001","from_balance":-100,"to_balance":100}`),
		IncomingHash:   mustHash(incomingPayload), IncomingPayload: json.RawMessage(incomingPayload),
		Detected: quarantine.Detection{ApplicationName: "payments-api", DBUser: "payments"},
		Diff: []quarantine.Change{
			{Path: "/amount", Kind: "changed", Stored: json.RawMessage(`100`), Incoming: json.RawMessage(`1000`)},
			{Path: "/memo", Kind: "added", Stored: json.RawMessage(`null`), Incoming: json.RawMessage(`"retry"`)},
		},
	}
	rec := func(id int64, tenant, op string, st quarantine.Status, occ int64, lastAgo time.Duration) quarantine.Record {
		r := base
		r.ID, r.Tenant, r.OperationID, r.Status, r.Occurrences = id, tenant, op, st, occ
		r.LastSeen = fixedNow.Add(-lastAgo)
		r.FirstSeen = r.LastSeen.Add(-time.Hour)
		return r
	}
	f := &fixedQuarantine{records: map[int64]quarantine.Record{}}
	for _, r := range []quarantine.Record{
		rec(12, "acme", "charge-42", quarantine.StatusOpen, 3, 2*time.Minute),
		rec(11, "globex", "payout-2026-11-30-0007", quarantine.StatusOpen, 1, 47*time.Minute),
		rec(9, "acme", "refund-17", quarantine.StatusOpen, 12, 5*time.Hour),
		rec(4, "initech", "bet-991-settle", quarantine.StatusRejected, 2, 72*time.Hour),
	} {
		f.records[r.ID] = r
	}
	return f
}

// match applies the filters the fixtures know: status, tenant, operation id
// (exact and prefix), class, changed field and group.
func (f *fixedQuarantine) match(r quarantine.Record, fl quarantine.Filter) bool {
	st := fl.Status
	if st == "" {
		st = quarantine.StatusOpen
	}
	changed := map[string]bool{}
	var fields []string
	for _, c := range r.Diff {
		if !changed[c.Path] {
			fields = append(fields, c.Path)
		}
		changed[c.Path] = true
	}
	sort.Strings(fields)
	g := fl.Group
	return (st == quarantine.StatusAll || r.Status == st) &&
		(fl.Tenant == "" || r.Tenant == fl.Tenant) && (fl.Op == "" || r.OperationID == fl.Op) &&
		strings.HasPrefix(r.OperationID, fl.OpPrefix) && (fl.Class == "" || r.Class == fl.Class || r.IncomingClass == fl.Class) &&
		(fl.Changed == "" || changed[fl.Changed]) &&
		(g == nil || g.Class == r.Class && g.IncomingClass == r.IncomingClass && strings.Join(g.Fields, " ") == strings.Join(fields, " "))
}

// sorted is every record matching fl, newest activity first.
func (f *fixedQuarantine) sorted(fl quarantine.Filter) []quarantine.Record {
	var out []quarantine.Record
	for _, r := range f.records {
		if f.match(r, fl) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].LastSeen.Equal(out[j].LastSeen) {
			return out[i].LastSeen.After(out[j].LastSeen)
		}
		return out[i].ID > out[j].ID
	})
	return out
}

func (f *fixedQuarantine) List(_ context.Context, fl quarantine.Filter) (quarantine.Page, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := fl.Validate(); err != nil {
		return quarantine.Page{}, err
	}
	limit := fl.Limit
	if limit == 0 {
		limit = quarantine.DefaultLimit
	}
	var page quarantine.Page
	for _, r := range f.sorted(fl) {
		if a := fl.After; a != nil && !(r.LastSeen.Before(a.LastSeen) || r.LastSeen.Equal(a.LastSeen) && r.ID < a.ID) {
			continue
		}
		if len(page.Items) == limit {
			last := page.Items[limit-1]
			page.Next = &quarantine.Cursor{LastSeen: last.LastSeen, ID: last.ID}
			break
		}
		page.Items = append(page.Items, quarantine.Summary{
			ID: r.ID, Tenant: r.Tenant, OperationID: r.OperationID, Class: r.Class, IncomingClass: r.IncomingClass,
			Status: r.Status, Occurrences: r.Occurrences, FirstSeen: r.FirstSeen, LastSeen: r.LastSeen, Changes: len(r.Diff),
		})
	}
	return page, nil
}

func (f *fixedQuarantine) Count(_ context.Context, fl quarantine.Filter) (quarantine.Totals, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rs := f.sorted(fl)
	t := quarantine.Totals{Matching: int64(len(rs))}
	for _, r := range rs {
		if r.Status == quarantine.StatusOpen && (t.OldestOpen == nil || r.FirstSeen.Before(*t.OldestOpen)) {
			first := r.FirstSeen
			t.OldestOpen = &first
		}
	}
	return t, nil
}

func (f *fixedQuarantine) Groups(_ context.Context, o quarantine.GroupOptions) ([]quarantine.Group, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := o.Filter
	fl.Status = quarantine.StatusOpen
	var out []quarantine.Group
	for _, r := range f.sorted(fl) {
		var fields []string
		for _, c := range r.Diff {
			fields = append(fields, c.Path)
		}
		sort.Strings(fields)
		found := false
		for i := range out {
			if strings.Join(out[i].Fields, " ") == strings.Join(fields, " ") && out[i].Class == r.Class {
				out[i].Count++
				found = true
			}
		}
		if !found {
			g := quarantine.Group{ID: "g-00000000000" + strconv.Itoa(len(out)+1),
				GroupKey: quarantine.GroupKey{Class: r.Class, IncomingClass: r.IncomingClass, Fields: fields},
				Count:    1, FirstSeen: r.FirstSeen, LastSeen: r.LastSeen}
			g.Example.ID, g.Example.Tenant, g.Example.OperationID = r.ID, r.Tenant, r.OperationID
			out = append(out, g)
		}
	}
	return out, nil
}

func (f *fixedQuarantine) PreviewBulk(_ context.Context, sel quarantine.Selection) (quarantine.Preview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var p quarantine.Preview
	for _, r := range f.selected(sel) {
		p.Open++
		p.MaxID = max(p.MaxID, r.ID)
		p.IDs = append(p.IDs, r.ID)
		if len(p.Sample) < quarantine.SampleSize {
			p.Sample = append(p.Sample, quarantine.Summary{ID: r.ID, Tenant: r.Tenant, OperationID: r.OperationID, Changes: len(r.Diff)})
		}
	}
	if sel.IDs == nil {
		fl := sel.Filter
		fl.Status = quarantine.StatusOpen
		p.Filter = &fl
	}
	if p.Open == 0 {
		return p, quarantine.ErrNothingToDecide
	}
	return p, nil
}

func (f *fixedQuarantine) selected(sel quarantine.Selection) []quarantine.Record {
	if sel.IDs == nil {
		fl := sel.Filter
		fl.Status = quarantine.StatusOpen
		return f.sorted(fl)
	}
	var out []quarantine.Record
	for _, id := range sel.IDs {
		if r, ok := f.records[id]; ok && r.Status == quarantine.StatusOpen {
			out = append(out, r)
		}
	}
	return out
}

func (f *fixedQuarantine) RejectBulk(_ context.Context, sel quarantine.Selection, o quarantine.BulkOptions) (quarantine.BulkResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res := quarantine.BulkResult{Run: "bulk-20261130T120000Z-0a0b0c0d", Batches: 1, FirstAudit: 40}
	for _, r := range f.selected(sel) {
		r.Status = quarantine.StatusRejected
		res.LastAudit = res.FirstAudit + res.Decided
		r.Decision = &quarantine.Decision{At: fixedNow, By: o.Operator, DBUser: "payments", Reason: o.Reason, AuditID: res.LastAudit}
		f.records[r.ID] = r
		res.Decided++
	}
	return res, nil
}

func (f *fixedQuarantine) Show(_ context.Context, id int64) (quarantine.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.records[id]
	if !ok {
		return quarantine.Record{}, fmt.Errorf("%w: no record %d", quarantine.ErrNotFound, id)
	}
	return r, nil
}

func (f *fixedQuarantine) Reject(_ context.Context, id int64, operator, reason string) (quarantine.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.records[id]
	r.Status = quarantine.StatusRejected
	r.Decision = &quarantine.Decision{At: fixedNow, By: operator, DBUser: "payments", Reason: reason, AuditID: 31}
	f.records[id] = r
	return r, nil
}

func (f *fixedQuarantine) AcceptAsNew(_ context.Context, id int64, newOp, operator, reason string) (quarantine.Acceptance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAccept != nil {
		return quarantine.Acceptance{}, f.failAccept
	}
	r := f.records[id]
	r.Status = quarantine.StatusAccepted
	r.Decision = &quarantine.Decision{At: fixedNow, By: operator, DBUser: "payments", Reason: reason,
		NewOperationID: newOp, NewOutcome: "applied", AuditID: 32}
	f.records[id] = r
	return quarantine.Acceptance{Record: r, Outcome: idem.Applied, Response: json.RawMessage(`{"ok":true}`)}, nil
}

func (f *fixedQuarantine) PlanAcceptOne(_ context.Context, id int64, newOp, operator, reason string) (quarantine.AcceptPlan, error) {
	return quarantine.AcceptPlan{ID: 1, State: quarantine.PlanPlanned, Rule: newOp, Max: 1, IDs: []int64{id}, Reason: reason,
		PlannedBy: operator, PlannedPerson: operator}, nil
}

// fixedAudit is an auditview.AuditService over fixed rows.
type fixedAudit struct{}

func (fixedAudit) List(context.Context, audit.Filter) ([]audit.Record, error) {
	h := func(n int) string { return fmt.Sprintf("sha256:%064x", n) }
	rows := []audit.Record{
		{ID: 30, At: fixedNow.Add(-3 * time.Minute), Actor: "root", Person: "bob", DBUser: "bob", Action: "quarantine.reject", Target: "quarantine:10",
			Details: json.RawMessage(`{"reason": "duplicate webhook, ticket PAY-88"}`)},
		{ID: 29, At: fixedNow.Add(-20 * time.Minute), Actor: "root", Person: "alice", DBUser: "op1", Action: "resolve.run", Target: "resolve:tui",
			Details: json.RawMessage(`{"source": "tui", "counts": {"applied": 1}, "dry_run": false, "operations": [` +
				strings.Repeat(`{"tenant": "acme", "operation_id": "charge-2026-11-30-000123", "outcome": "applied"}, `, 12) +
				`{"tenant": "acme", "operation_id": "charge-last-of-the-run", "outcome": "applied"}]}`)},
		{ID: 28, At: fixedNow.Add(-time.Hour), Actor: "alice", DBUser: "payments", Action: "quarantine.export", Target: "quarantine:9",
			Details: json.RawMessage(`{"verified": true}`)},
	}
	for i := range rows {
		rows[i].Hash, rows[i].PrevHash = h(int(rows[i].ID)), h(int(rows[i].ID)-1)
	}
	return rows, nil
}

func (fixedAudit) Verify(context.Context) (audit.Report, error) {
	last := fmt.Sprintf("sha256:%064x", 30)
	return audit.Report{Rows: 30, LastID: 30, LastHash: last, HeadID: 30, HeadHash: last, Intact: true}, nil
}

// fixedStepper answers every step of the protocol with a conflict.
type fixedStepper struct {
	// absent makes the identity absent (then Execute applies it).
	absent bool
}

func (fixedStepper) CheckPrimary(context.Context) (time.Time, error) { return fixedNow, nil }

func (s fixedStepper) Lookup(_ context.Context, p idem.Prepared, _ string, _ bool) (resolveview.Stored, error) {
	if s.absent {
		return resolveview.Stored{}, nil
	}
	return resolveview.Stored{Found: true, Hash: mustHash(storedPayload), Class: p.Class}, nil
}

func (s fixedStepper) Execute(_ context.Context, p idem.Prepared, _ string) (recovery.Result, error) {
	res := recovery.Result{Tenant: p.TenantID, OperationID: p.OperationID, Class: p.Class, IncomingHash: p.Hash}
	if s.absent {
		res.Outcome, res.Response = recovery.Applied, json.RawMessage(`{"posting_id":"5b1f0c7e-0000-4000-8000-000000000002","to_balance":1000}`)
		return res, nil
	}
	res.Outcome, res.QuarantineID, res.StoredHash = recovery.Conflict, 13, mustHash(storedPayload)
	return res, nil
}

// fixedHorizon is a horizonview.HorizonService over fixed sources and plans.
type fixedHorizon struct {
	mu    sync.Mutex
	plans []horizonview.PurgePlan
	// failLoad, when set, is the error Plans returns.
	failLoad error
	// firstSource, when set, is the first source's name.
	firstSource string
}

func newFixedHorizon() *fixedHorizon {
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	return &fixedHorizon{plans: []horizonview.PurgePlan{
		{ID: 3, Scope: "acme/demo.transfer", Before: day(2026, 10, 1), State: horizonview.PlanPlanned, Identities: 12840,
			PlannedBy: horizonview.Who{Person: "alice", Login: "op1"}, PlannedAt: fixedNow.Add(-time.Hour), Contract: "FIN-2026-114",
			Proof:    []string{"kafka:payments.commands: closed, retention 7d", "dlq:payments: closed, nothing to replay"},
			HeldBack: "3: quarantine 3 (open or rejected records)"},
		{ID: 2, Scope: "globex/*", Before: day(2026, 9, 1), State: horizonview.PlanApproved, Identities: 5000,
			PlannedBy: horizonview.Who{Person: "carol", Login: "carol"}, PlannedAt: fixedNow.Add(-26 * time.Hour), ApprovedBy: horizonview.Who{Person: "alice", Login: "op1"}},
		{ID: 1, Scope: "initech/bets.settle", Before: day(2026, 8, 1), State: horizonview.PlanAborted, Identities: 700,
			PlannedBy: horizonview.Who{Person: "bob", Login: "bob"}, PlannedAt: fixedNow.Add(-72 * time.Hour), ApprovedBy: horizonview.Who{Person: "carol", Login: "carol"},
			AbortReason: "horizon moved: archive s3://replays can replay from 2026-07-20"},
	}}
}

func (h *fixedHorizon) Sources(context.Context) ([]horizonview.HorizonSource, error) {
	src := []horizonview.HorizonSource{
		{Name: "kafka:payments.commands", Kind: "topic", ProbedAt: fixedNow.Add(-2 * time.Minute), Result: "closed", Proven: true,
			Detail: "retention 7d, oldest offset 2026-11-23"},
		{Name: "kafka:payments.dlq", Kind: "dlq", ProbedAt: fixedNow.Add(-2 * time.Minute), Result: "closed", Proven: true,
			Detail: "empty"},
		{Name: "s3://replays", Kind: "archive", ProbedAt: fixedNow.Add(-3 * time.Hour), Result: "unreachable",
			Detail: "timeout after 10s"},
	}
	if h.firstSource != "" {
		src[0].Name = h.firstSource
	}
	return src, nil
}

func (h *fixedHorizon) Plans(context.Context) ([]horizonview.PurgePlan, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failLoad != nil {
		return nil, h.failLoad
	}
	return append([]horizonview.PurgePlan(nil), h.plans...), nil
}

func (h *fixedHorizon) plan(id int64) *horizonview.PurgePlan {
	for i := range h.plans {
		if h.plans[i].ID == id {
			return &h.plans[i]
		}
	}
	return nil
}

func (h *fixedHorizon) Approve(_ context.Context, id int64, operator string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.plan(id)
	if p == nil {
		return errors.New("no such plan")
	}
	if p.PlannedBy.Person == operator {
		return fmt.Errorf("approve plan %d: %w", id, horizonview.ErrSameOperator)
	}
	p.State, p.ApprovedBy = horizonview.PlanApproved, horizonview.Who{Person: operator, Login: operator}
	return nil
}

func (h *fixedHorizon) Purge(_ context.Context, id int64, _ string, progress func(done, total int64)) (horizonview.PurgeResult, error) {
	h.mu.Lock()
	p := h.plan(id)
	total := p.Identities
	h.mu.Unlock()
	progress(1000, total)
	progress(2500, total)
	h.mu.Lock()
	defer h.mu.Unlock()
	p.State = horizonview.PlanAborted
	p.AbortReason = "horizon moved: kafka:payments.dlq can replay from 2026-08-20"
	return horizonview.PurgeResult{Purged: 2500, Aborted: true, AbortReason: p.AbortReason}, nil
}

// fixedReconcile is a reconcileview.ReconcileService over two saved mappings (one of them
// unreadable) and one fixed run.
type fixedReconcile struct {
	mu   sync.Mutex
	pins []string // "tenant/op: reason" of every pin
}

func (r *fixedReconcile) Mappings(context.Context) ([]reconcile.SavedMapping, error) {
	return []reconcile.SavedMapping{
		{Path: "/home/alice/.config/idemctl/reconcile/psp-settlement.json", Mapping: reconcile.Mapping{Name: "psp-settlement",
			Class: "demo.transfer", Report: "/srv/psp/settlement.csv", Key: "tenant=merchant,operation_id=reference",
			Compare: "/amount=amount_minor,/currency=currency", Since: "yesterday", Until: "today"}},
		{Path: "/home/alice/.config/idemctl/reconcile/bank.json", Mapping: reconcile.Mapping{Name: "bank"},
			Err: errors.New(`invalid reconcile mapping: bank.json: json: unknown field "comapre"`)},
	}, nil
}

func (r *fixedReconcile) Run(_ context.Context, m reconcile.Mapping, _ string) (reconcileview.ReconcileRun, error) {
	created := fixedNow.Add(-20 * time.Hour)
	inbox := "2000"
	findings := []reconcile.Finding{
		{Status: reconcile.Mismatch, Line: 3, Tenant: "acme", OperationID: "p-2", Class: "demo.transfer", CreatedAt: &created,
			Amount: "2000", Currency: "EUR", Differences: []reconcile.Difference{{Pointer: "/amount", Column: "amount_minor", Inbox: &inbox, Report: "1999"}}},
		{Status: reconcile.MissingInInbox, Line: 6, Tenant: "acme", OperationID: "x-9", Class: "demo.transfer", Amount: "5", Currency: "EUR",
			Note: "the report settled an operation the inbox never recorded"},
		{Status: reconcile.Invalid, Line: 8, Reason: `amount_minor is not a number: "1.250,00" (amounts are plain decimals: 1250, 12.50)`},
		{Status: reconcile.MissingInReport, Tenant: "globex", OperationID: "p-5", Class: "demo.transfer", CreatedAt: &created, Amount: "5000", Currency: "USD"},
	}
	sum := reconcile.Summary{Class: m.Class, AuditID: 42, StartedAt: fixedNow,
		Report: reconcile.ReportInfo{Name: "settlement.csv", SHA256: "3f7a9c0d5e1b2a4c6d8e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e", Lines: 9997, Format: reconcile.FormatCSV},
		Counts: map[reconcile.Status]int64{reconcile.Matched: 9994, reconcile.Mismatch: 1, reconcile.MissingInInbox: 1,
			reconcile.MissingInReport: 1, reconcile.Invalid: 1},
		Amounts: map[reconcile.Status]map[string]reconcile.Totals{
			reconcile.Matched:         {"EUR": {Inbox: "1234500", Report: "1234500"}},
			reconcile.Mismatch:        {"EUR": {Inbox: "2000", Report: "1999"}},
			reconcile.MissingInInbox:  {"EUR": {Report: "5"}},
			reconcile.MissingInReport: {"USD": {Inbox: "5000"}},
		}}
	return reconcileview.ReconcileRun{Name: m.Name, Summary: sum, Findings: findings}, nil
}

func (r *fixedReconcile) Pin(_ context.Context, run *reconcileview.ReconcileRun, i int, _ string) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The fixed findings hold nothing to escape: as shown is as read.
	f := run.Findings[i]
	r.pins = append(r.pins, f.Tenant+"/"+f.OperationID+": "+reconcile.PinReason(f, run.Summary.Report))
	return 17, nil
}
