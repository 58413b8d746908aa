package reconcile

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// item is a finding on its way out, with what the summary, the batch and
// the pins need besides it.
type item struct {
	f              Finding
	rec            *record // a report line still to look up (a candidate)
	revs           []record
	revOnly        bool // rec is a reversal: the operation's own row is not in the report
	inbox, report  side
	inInbox        bool
	fromReport     bool
	payload, trans []byte // missing_in_report: the stored payload and transport
	notCompared    bool   // in both, but the inbox's body was purged: no field compared
}

// merger walks the sorted report and the inbox stream side by side, one
// identity at a time: the report's lines of an identity (its own row, rows
// that reverse it, repeats) are consecutive. An identity the window does
// not hold is a candidate: it waits in the queue, in order, until a batch
// lookup says whether the inbox holds it elsewhere (another time, another
// class, a tombstone) or not at all.
type merger struct {
	r     *run
	rep   *mergeIter
	inbox *inboxStream
	cmp   comparer

	queue []item
	cands []int // positions in queue of the candidates

	look        record // the first line of the next group, read ahead
	hasLook     bool
	inboxTenant string // the last inbox identity (a repeat is skipped)
	inboxOp     string
}

// run merges until both sides are exhausted.
func (m *merger) run(ctx context.Context) error {
	g, gok, err := m.nextGroup(nil)
	if err != nil {
		return err
	}
	row, iok, err := m.nextInbox(ctx)
	if err != nil {
		return err
	}
	for gok || iok {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := -1
		switch {
		case !gok:
			c = 1
		case iok:
			c = compareKey(g[0].tenant, g[0].op, row.tenant, row.op)
		}
		if c <= 0 {
			if c == 0 {
				m.group(g, &row)
			} else {
				m.group(g, nil)
			}
			if g, gok, err = m.nextGroup(g); err != nil {
				return err
			}
		}
		if c >= 0 {
			if c > 0 {
				m.inboxOnly(row)
			}
			if row, iok, err = m.nextInbox(ctx); err != nil {
				return err
			}
		}
		if len(m.queue) >= m.r.cfg.BatchSize || len(m.cands) >= m.r.cfg.BatchSize {
			if err := m.flush(ctx); err != nil {
				return err
			}
		}
	}
	return m.flush(ctx)
}

// nextGroup reads the report's lines of the next identity into buf.
func (m *merger) nextGroup(buf []record) ([]record, bool, error) {
	if !m.hasLook {
		rec, ok, err := m.rep.next()
		if err != nil || !ok {
			return nil, false, err
		}
		m.look = rec
	}
	g := append(buf[:0], m.look)
	m.hasLook = false
	for {
		rec, ok, err := m.rep.next()
		if err != nil {
			return nil, false, err
		}
		if !ok {
			return g, true, nil
		}
		if rec.tenant != g[0].tenant || rec.op != g[0].op {
			m.look, m.hasLook = rec, true
			return g, true, nil
		}
		g = append(g, rec)
	}
}

// nextInbox reads the next inbox row, skipping a repeated identity.
func (m *merger) nextInbox(ctx context.Context) (inboxRow, bool, error) {
	for {
		row, ok, err := m.inbox.next(ctx)
		if err != nil || !ok {
			return row, ok, err
		}
		if row.tenant != m.inboxTenant || row.op != m.inboxOp {
			m.inboxTenant, m.inboxOp = row.tenant, row.op
			return row, true, nil
		}
	}
}

// group takes the report's lines of one identity, and its inbox row when
// the window holds it: invalid lines are invalid, rows that reverse the
// operation go with it, a repeat of its own row is duplicate_in_report.
func (m *merger) group(g []record, row *inboxRow) {
	var op *record
	var revs []record
	var dups []item
	for i := range g {
		rec := &g[i]
		switch {
		case rec.invalid != "":
			m.push(m.invalid(rec, rec.invalid))
		case rec.kind != "":
			revs = append(revs, *rec)
		case op == nil:
			op = rec
		default:
			dups = append(dups, item{fromReport: true, report: m.cmp.reportSide(rec), f: Finding{
				Status: DuplicateInReport, Line: rec.line, Tenant: rec.tenant, OperationID: rec.op, Class: m.r.p.Class,
				Lines:  []int64{op.line, rec.line},
				Reason: fmt.Sprintf("the operation's row is on lines %d and %d (settled twice?); line %d is compared", op.line, rec.line, op.line)}})
		}
	}
	if op == nil && len(revs) == 0 {
		return
	}
	primary, revOnly := op, false
	if primary == nil {
		primary, revOnly = &revs[0], true
	}
	rec := *primary
	if row != nil {
		m.push(m.compared(&rec, revs, revOnly, row.payload, row.createdAt))
	} else {
		m.cands = append(m.cands, len(m.queue))
		m.push(item{rec: &rec, revs: revs, revOnly: revOnly})
	}
	m.queue = append(m.queue, dups...)
}

// inboxOnly takes an operation of the window the report does not hold.
func (m *merger) inboxOnly(row inboxRow) {
	created := row.createdAt
	it := item{inInbox: true, payload: row.payload, trans: row.transport, f: Finding{
		Status: MissingInReport, Tenant: row.tenant, OperationID: row.op, Class: m.r.p.Class, CreatedAt: &created}}
	it.inbox = side{amount: m.cmp.stored(row.payload, m.r.p.amountTokens, true), currency: m.cmp.stored(row.payload, m.r.p.currencyTokens, false)}
	m.push(it)
}

// invalid is the finding of a report line that cannot be used.
func (m *merger) invalid(rec *record, why string) item {
	return item{fromReport: true, report: m.cmp.reportSide(rec),
		f: Finding{Status: Invalid, Line: rec.line, Tenant: rec.tenant, OperationID: rec.op, Reason: why}}
}

// compared is the finding of a report line whose operation the inbox holds,
// with the rows that reverse it; revOnly: rec is one of them, the
// operation's own row is not in the report.
func (m *merger) compared(rec *record, revs []record, revOnly bool, payload []byte, created time.Time) item {
	it := item{inInbox: true, fromReport: !revOnly, report: m.cmp.reportSide(rec),
		f: Finding{Status: Matched, Line: rec.line, Tenant: rec.tenant, OperationID: rec.op, Class: m.r.p.Class, CreatedAt: &created}}
	if revOnly {
		it.inbox = side{amount: m.cmp.stored(payload, m.r.p.amountTokens, true), currency: m.cmp.stored(payload, m.r.p.currencyTokens, false)}
		it.f.Note = "the report reverses the operation; its own row is not in this report"
		m.reversed(&it, revs)
		return it
	}
	diffs, inbox, err := m.cmp.compare(payload, rec)
	if err != nil {
		it.f.Status, it.f.Note = Mismatch, err.Error()
		return it
	}
	it.inbox = inbox
	if len(diffs) > 0 {
		it.f.Status, it.f.Differences = Mismatch, diffs
	}
	m.reversed(&it, revs)
	return it
}

// reversed reports the rows that reverse the operation with it: their
// amounts and sum, and a matched operation becomes refunded (all of its
// amount) or partially_refunded.
func (m *merger) reversed(it *item, revs []record) {
	if len(revs) == 0 {
		return
	}
	p := m.r.p
	total, known := new(big.Rat), p.amount >= 0
	for i := range revs {
		r := Reversal{Line: revs[i].line, Kind: revs[i].kind}
		if p.amount >= 0 {
			r.Amount = strings.TrimPrefix(revs[i].values[p.amount], "-")
			if v, ok := parseDecimal(r.Amount); ok {
				total.Add(total, v)
			} else {
				known = false
			}
		}
		it.f.Reversals = append(it.f.Reversals, r)
	}
	if known {
		it.f.Reversed = total.RatString()
	}
	if it.f.Status != Matched {
		return
	}
	it.f.Status = PartiallyRefunded
	base := it.inbox.amount
	if base == "" {
		base = it.report.amount
	}
	if b, ok := parseDecimal(base); ok && known && total.Cmp(new(big.Rat).Abs(b)) >= 0 {
		it.f.Status = Refunded
	}
}

func (m *merger) push(it item) { m.queue = append(m.queue, it) }

// flush looks the candidates up, then delivers the queue in order.
func (m *merger) flush(ctx context.Context) error {
	if len(m.cands) > 0 {
		tenants, ops := make([]string, len(m.cands)), make([]string, len(m.cands))
		for i, q := range m.cands {
			tenants[i], ops[i] = m.queue[q].rec.tenant, m.queue[q].rec.op
		}
		found, err := lookup(ctx, m.r.pool, tenants, ops, true)
		if err != nil {
			return err
		}
		for i, q := range m.cands {
			m.queue[q] = m.resolve(&m.queue[q], found[i])
		}
	}
	for i := range m.queue {
		if err := m.r.deliver(&m.queue[i]); err != nil {
			return err
		}
	}
	clear(m.queue)
	m.queue, m.cands = m.queue[:0], m.cands[:0]
	return nil
}

// resolve says what a candidate is, now that the lookup has answered.
func (m *merger) resolve(cand *item, s *stored) item {
	p, rec := m.r.p, cand.rec
	switch {
	case s == nil:
		rs := m.cmp.reportSide(rec)
		it := item{fromReport: true, report: rs, rec: rec, revOnly: cand.revOnly, f: Finding{Status: MissingInInbox, Line: rec.line,
			Tenant: rec.tenant, OperationID: rec.op, Class: p.Class,
			Note: "the report settled an operation the inbox never recorded"}}
		if cand.revOnly {
			it.f.Note = "the report reverses an operation the inbox never recorded"
		}
		m.reversed(&it, cand.revs)
		return it
	case s.class != p.Class:
		created, class, want := s.createdAt, s.class, p.Class
		return item{inInbox: true, fromReport: true, report: m.cmp.reportSide(rec), f: Finding{Status: Mismatch,
			Line: rec.line, Tenant: rec.tenant, OperationID: rec.op, Class: class, CreatedAt: &created,
			Differences: []Difference{{Field: "class", Inbox: &class, Report: want}},
			Note:        "the identity is recorded under another class"}}
	case s.purged && cand.revOnly:
		created := s.createdAt
		it := item{inInbox: true, f: Finding{Status: Matched, Line: rec.line, Tenant: rec.tenant, OperationID: rec.op,
			Class: p.Class, CreatedAt: &created, Note: "purged: only the identity's tombstone is left"}, notCompared: true}
		m.reversed(&it, cand.revs)
		return it
	case s.purged:
		created := s.createdAt
		it := item{inInbox: true, fromReport: true, report: m.cmp.reportSide(rec), f: Finding{Status: Matched,
			Line: rec.line, Tenant: rec.tenant, OperationID: rec.op, Class: p.Class, CreatedAt: &created,
			Note: "purged: only the identity's tombstone is left, its fields were not compared"}, notCompared: true}
		m.reversed(&it, cand.revs)
		return it
	}
	it := m.compared(rec, cand.revs, cand.revOnly, s.payload, s.createdAt)
	where := ", outside the window"
	if (p.since == nil || !s.createdAt.Before(*p.since)) && (p.until == nil || s.createdAt.Before(*p.until)) {
		where = ", during the run"
	}
	note := "recorded at " + s.createdAt.UTC().Format(time.RFC3339Nano) + where
	if it.f.Note != "" {
		note = it.f.Note + "; " + note
	}
	it.f.Note = note
	return it
}
