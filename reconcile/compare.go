package reconcile

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Status is what a reconcile says of an operation or of a report line.
type Status string

// Statuses.
const (
	// Matched: in both, every compared field equal.
	Matched Status = "matched"
	// Mismatch: in both, a compared field (or the class) differs.
	Mismatch Status = "mismatch"
	// MissingInInbox: the report settled an operation the inbox never
	// recorded: an effect without its marker, the worst case.
	MissingInInbox Status = "missing_in_inbox"
	// MissingInReport: recorded in the inbox within the window, not in the
	// report (not settled yet, or lost downstream).
	MissingInReport Status = "missing_in_report"
	// Invalid: a report line that cannot be used, with its line number and why.
	Invalid Status = "invalid"
	// Refunded and PartiallyRefunded: matched, and the report also holds
	// rows that reverse the operation (refunds, chargebacks) for all of its
	// amount or for part of it.
	Refunded          Status = "refunded"
	PartiallyRefunded Status = "partially_refunded"
	// DuplicateInReport: the report holds the operation's own row twice
	// (settled twice?); the first row is compared, each further one is this.
	DuplicateInReport Status = "duplicate_in_report"
)

// Statuses lists every status in the summary's order.
var Statuses = []Status{Matched, Refunded, PartiallyRefunded, Mismatch, MissingInInbox, MissingInReport,
	DuplicateInReport, Invalid}

// Discrepancy reports whether the status is one a person must look at.
func (s Status) Discrepancy() bool {
	return s == Mismatch || s == MissingInInbox || s == MissingInReport || s == DuplicateInReport
}

// Difference is one compared field that differs.
type Difference struct {
	// Pointer is the JSON Pointer in the stored payload; empty for a class.
	Pointer string `json:"pointer,omitempty"`
	// Field is "class" when the identity is recorded under another class.
	Field string `json:"field,omitempty"`
	// Column is the report column compared.
	Column string `json:"column,omitempty"`
	// Inbox is the stored value (nil: absent from the payload); Report the
	// report's.
	Inbox  *string `json:"inbox"`
	Report string  `json:"report"`
}

// isDecimal reports whether s is a number as a report may write it: an
// optional sign, digits with at most one decimal point, an optional exponent
// of at most four digits (a huge one would be a memory bomb); no thousands
// separator, no decimal comma; at most 64 bytes.
func isDecimal(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	i := 0
	if s[0] == '+' || s[0] == '-' {
		i++
	}
	digits, dot := 0, false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot:
			dot = true
		case c == 'e' || c == 'E':
			return digits > 0 && isExponent(s[i+1:])
		default:
			return false
		}
	}
	return digits > 0
}

func isExponent(s string) bool {
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if len(s) == 0 || len(s) > 4 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseDecimal reads an exact decimal number.
func parseDecimal(s string) (*big.Rat, bool) {
	if !isDecimal(s) {
		return nil, false
	}
	return new(big.Rat).SetString(s)
}

// equalValue compares a stored value with a report's: numerically when the
// stored value is a JSON number (1250 = 1250.00 = 1.25e3), exactly otherwise
// (a string's contents, any other value's JSON text).
func equalValue(stored jsonValue, report string) bool {
	if stored.text == report {
		return true
	}
	if !stored.number() {
		return false
	}
	a, ok := parseDecimal(stored.text)
	if !ok {
		return false
	}
	b, ok := parseDecimal(report)
	return ok && a.Cmp(b) == 0
}

// side is one side's amount and currency, for the totals ("" when unknown).
type side struct {
	amount, currency string
}

// comparer compares stored payloads with report lines under a plan.
type comparer struct {
	p  *plan
	pr pointerReader
}

// compare returns the differences between a stored payload and a report
// line, and the stored amount and currency. A payload that is not JSON is an
// error (the inbox stores canonical JSON, so it means a broken row).
func (c *comparer) compare(payload []byte, rec *record) ([]Difference, side, error) {
	var diffs []Difference
	var inbox side
	for i, f := range c.p.fields {
		v, err := c.pr.valueAt(payload, f.tokens)
		if err != nil && !errors.Is(err, errNotFound) {
			return nil, side{}, fmt.Errorf("stored payload of %s/%s: %w", rec.tenant, rec.op, err)
		}
		found := err == nil
		switch i {
		case c.p.amount:
			inbox.amount = v.text
		case c.p.currency:
			inbox.currency = v.text
		}
		if found && (equalValue(v, rec.values[i]) || (i == c.p.currency && strings.EqualFold(v.text, rec.values[i]))) {
			continue
		}
		d := Difference{Pointer: f.Pointer, Column: f.Column, Report: rec.values[i]}
		if found {
			d.Inbox = &v.text
		}
		diffs = append(diffs, d)
	}
	if c.p.amount < 0 {
		inbox.amount = c.stored(payload, c.p.amountTokens, true)
	}
	if c.p.currency < 0 {
		inbox.currency = c.stored(payload, c.p.currencyTokens, false)
	}
	return diffs, inbox, nil
}

// stored reads one value of a payload for the totals ("" when absent, or
// not a number where a number is wanted).
func (c *comparer) stored(payload []byte, tokens []string, number bool) string {
	v, err := c.pr.valueAt(payload, tokens)
	if err != nil || (number && !v.number()) {
		return ""
	}
	return v.text
}

// reportSide is a report line's amount and currency.
func (c *comparer) reportSide(rec *record) side {
	var s side
	if c.p.amount >= 0 {
		s.amount = rec.values[c.p.amount]
	}
	if c.p.currency >= 0 {
		s.currency = c.p.upper.of(rec.values[c.p.currency])
	}
	return s
}
