package reconcile

import (
	"context"
	"fmt"
	"time"
)

// item is a finding on its way out, with what the summary, the batch and
// the pins need besides it.
type item struct {
	f              Finding
	rec            *record // a report line still to look up (a candidate)
	inbox, report  side
	inInbox        bool
	fromReport     bool
	payload, trans []byte // missing_in_report: the stored payload and transport
}

// merger walks the sorted report and the inbox stream side by side. Report
// lines whose identity the window does not hold are candidates: they wait in
// the queue, in order, until a batch lookup says whether the inbox holds
// them elsewhere (another time, another class, a tombstone) or not at all.
type merger struct {
	r     *run
	rep   *mergeIter
	inbox *inboxStream
	cmp   comparer

	queue []item
	cands []int // positions in queue of the candidates

	prevTenant, prevOp string // the last report identity, for duplicates
	prevLine           int64
	hasPrev            bool
	inboxTenant        string // the last inbox identity (a repeat is skipped)
	inboxOp            string
}

// run merges until both sides are exhausted.
func (m *merger) run(ctx context.Context) error {
	rec, rok, err := m.rep.next()
	if err != nil {
		return err
	}
	row, iok, err := m.nextInbox(ctx)
	if err != nil {
		return err
	}
	for rok || iok {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := m.order(&rec, rok, &row, iok)
		if c <= 0 {
			if c == 0 {
				m.both(rec, row)
			} else {
				m.reportOnly(rec)
			}
			if rec, rok, err = m.rep.next(); err != nil {
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

// order says which side comes first: -1 the report line (or a repeat of the
// previous report identity), 1 the inbox row, 0 both.
func (m *merger) order(rec *record, rok bool, row *inboxRow, iok bool) int {
	switch {
	case !iok:
		return -1
	case !rok:
		return 1
	case m.hasPrev && rec.tenant == m.prevTenant && rec.op == m.prevOp:
		return -1
	}
	return compareKey(rec.tenant, rec.op, row.tenant, row.op)
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

// duplicate reports whether rec repeats the previous report identity, and
// remembers rec's identity otherwise.
func (m *merger) duplicate(rec *record) bool {
	if m.hasPrev && rec.tenant == m.prevTenant && rec.op == m.prevOp {
		return true
	}
	m.prevTenant, m.prevOp, m.prevLine, m.hasPrev = rec.tenant, rec.op, rec.line, true
	return false
}

// reportOnly takes a report line the window's inbox does not hold.
func (m *merger) reportOnly(rec record) {
	switch {
	case m.duplicate(&rec):
		m.push(m.invalid(&rec, fmt.Sprintf("duplicate: the identity is also on line %d (settled twice?)", m.prevLine)))
	case rec.invalid != "":
		m.push(m.invalid(&rec, rec.invalid))
	default:
		m.cands = append(m.cands, len(m.queue))
		m.push(item{rec: &rec})
	}
}

// both compares a report line with the inbox row of its identity.
func (m *merger) both(rec record, row inboxRow) {
	m.duplicate(&rec)
	if rec.invalid != "" {
		m.push(m.invalid(&rec, rec.invalid))
		return
	}
	it := m.compared(&rec, row.payload, row.createdAt)
	m.push(it)
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

// compared is the finding of a report line whose operation the inbox holds.
func (m *merger) compared(rec *record, payload []byte, created time.Time) item {
	it := item{inInbox: true, fromReport: true, report: m.cmp.reportSide(rec),
		f: Finding{Status: Matched, Line: rec.line, Tenant: rec.tenant, OperationID: rec.op, Class: m.r.p.Class, CreatedAt: &created}}
	diffs, inbox, err := m.cmp.compare(payload, rec)
	if err != nil {
		it.f.Status, it.f.Note = Mismatch, err.Error()
		return it
	}
	it.inbox = inbox
	if len(diffs) > 0 {
		it.f.Status, it.f.Differences = Mismatch, diffs
	}
	return it
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
			m.queue[q] = m.resolve(m.queue[q].rec, found[i])
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
func (m *merger) resolve(rec *record, s *stored) item {
	p := m.r.p
	switch {
	case s == nil:
		rs := m.cmp.reportSide(rec)
		return item{fromReport: true, report: rs, f: Finding{Status: MissingInInbox, Line: rec.line,
			Tenant: rec.tenant, OperationID: rec.op, Class: p.Class,
			Note: "the report settled an operation the inbox never recorded"}}
	case s.class != p.Class:
		created, class, want := s.createdAt, s.class, p.Class
		return item{inInbox: true, fromReport: true, report: m.cmp.reportSide(rec), f: Finding{Status: Mismatch,
			Line: rec.line, Tenant: rec.tenant, OperationID: rec.op, Class: class, CreatedAt: &created,
			Differences: []Difference{{Field: "class", Inbox: &class, Report: want}},
			Note:        "the identity is recorded under another class"}}
	case s.purged:
		created := s.createdAt
		return item{inInbox: true, fromReport: true, report: m.cmp.reportSide(rec), f: Finding{Status: Matched,
			Line: rec.line, Tenant: rec.tenant, OperationID: rec.op, Class: p.Class, CreatedAt: &created,
			Note: "purged: only the identity's tombstone is left, its fields were not compared"}}
	}
	it := m.compared(rec, s.payload, s.createdAt)
	where := ", outside the window"
	if (p.since == nil || !s.createdAt.Before(*p.since)) && (p.until == nil || s.createdAt.Before(*p.until)) {
		where = ", during the run"
	}
	it.f.Note = "recorded at " + s.createdAt.UTC().Format(time.RFC3339Nano) + where
	return it
}
