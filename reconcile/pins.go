package reconcile

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/term"
)

// maxReasonBytes is the longest correction reason the database takes.
const maxReasonBytes = 4096

// deliver counts a finding, adds its amounts, writes it to the batch and the
// pins when it goes there, and emits it.
func (r *run) deliver(it *item) error {
	f := &it.f
	r.sum.Counts[f.Status]++
	if it.notCompared {
		r.sum.NotCompared++
	}
	if it.inInbox {
		r.totals.add(f.Status, it.inbox, false)
	}
	if it.fromReport {
		r.totals.add(f.Status, it.report, true)
	}
	s := it.report
	if it.inInbox && it.inbox.amount != "" {
		s = it.inbox
	}
	f.Amount, f.Currency = s.amount, s.currency
	if f.Status == MissingInReport && r.batch != nil {
		if err := r.batch.Write(BatchLine{Tenant: f.Tenant, OperationID: f.OperationID, Class: f.Class,
			Payload: it.payload, Transport: it.trans}); err != nil {
			return err
		}
	}
	if f.Status == MissingInInbox && r.record != nil && it.rec != nil && !it.revOnly {
		l, err := r.p.recordLine(*f, it.rec, r.sum.Report)
		if err == nil {
			err = r.record.WriteValue(l)
		}
		if err != nil {
			return fmt.Errorf("write the record plan input: %w", err)
		}
	}
	if r.pins != nil && f.Status.Discrepancy() {
		if err := r.pins.add(&record{tenant: f.Tenant, op: f.OperationID, line: f.Line,
			invalid: PinReason(*f, r.sum.Report)}); err != nil {
			return err
		}
	}
	if r.emit != nil {
		if err := r.emit(*f); err != nil {
			return fmt.Errorf("%w: %v", ErrWriteResults, err)
		}
	}
	return nil
}

// PinReason is the reason of the manual correction that pins a discrepancy:
// the report's name and line, the finding and its detail, and the report's
// whole SHA-256 (an operator checks it against the file). Control
// characters from the report are escaped and white space folded: a reason
// is shown on operators' terminals. A reason longer than the database
// takes loses the end of its detail, never the hash.
func PinReason(f Finding, rep ReportInfo) string {
	where := rep.Name
	if f.Line > 0 {
		where += fmt.Sprintf(" line %d", f.Line)
	}
	fold := func(s string) string { return strings.Join(strings.Fields(term.Escape(s)), " ") }
	tail := fold("; report sha256:" + rep.SHA256)
	return truncate(fold(fmt.Sprintf("reconcile %s: %s: %s", where, f.Status, f.Detail())), maxReasonBytes-len(tail)) + tail
}

// truncate cuts s to at most max bytes at a character boundary, ending
// with "…" when cut.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// pinBatch is how many pins are checked against pending corrections at once.
const pinBatch = 500

// applyPins records every spooled discrepancy as a pending manual
// correction (horizon.AddCorrection, which writes its own audit row),
// skipping those a pending correction already pins with the same reason.
func (r *run) applyPins(ctx context.Context) error {
	if r.pins.n > int64(r.cfg.MaxPins) {
		r.sum.Withheld = fmt.Sprintf("%d discrepancies are more than --max-pins %d: nothing pinned", r.pins.n, r.cfg.MaxPins)
		return nil
	}
	var batch []record
	err := r.pins.each(func(rec *record) error {
		batch = append(batch, *rec)
		if len(batch) < pinBatch {
			return nil
		}
		err := r.pinBatch(ctx, batch)
		batch = batch[:0]
		return err
	})
	if err == nil && len(batch) > 0 {
		err = r.pinBatch(ctx, batch)
	}
	return err
}

func (r *run) pinBatch(ctx context.Context, batch []record) error {
	tenants, ops := make([]string, len(batch)), make([]string, len(batch))
	for i, rec := range batch {
		tenants[i], ops[i] = rec.tenant, rec.op
	}
	rows, err := r.pool.Query(ctx, pendingCorrectionsSQL, tenants, ops)
	if err != nil {
		return fmt.Errorf("pin: read pending corrections: %w", err)
	}
	pending := map[[3]string]bool{}
	for rows.Next() {
		var k [3]string
		if err := rows.Scan(&k[0], &k[1], &k[2]); err != nil {
			rows.Close()
			return fmt.Errorf("pin: read pending corrections: %w", err)
		}
		pending[k] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pin: read pending corrections: %w", err)
	}
	for _, rec := range batch {
		if pending[[3]string{rec.tenant, rec.op, rec.invalid}] {
			r.sum.AlreadyPinned++
			continue
		}
		id := idem.Identity{TenantID: rec.tenant, OperationID: rec.op}
		if _, err := horizon.AddCorrection(ctx, r.pool, id, rec.invalid, r.cfg.Operator); err != nil {
			return fmt.Errorf("pin %s line %d: %w", id, rec.line, err)
		}
		r.sum.Pinned++
		pending[[3]string{rec.tenant, rec.op, rec.invalid}] = true
	}
	return nil
}
