package reconcile

import (
	"fmt"
	"math/big"
	"sort"
	"strings"
	"time"
)

// Finding is one line of a reconcile's output: an operation or a report line
// and what the run says of it.
type Finding struct {
	Status Status `json:"status"`
	// Line is the report's line (1-based, the header included); 0 for
	// missing_in_report.
	Line        int64  `json:"line,omitempty"`
	Tenant      string `json:"tenant,omitempty"`
	OperationID string `json:"operation_id,omitempty"`
	// Class is the class the identity is recorded under (the reconciled
	// class for missing_in_inbox).
	Class     string     `json:"class,omitempty"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
	// Amount and Currency are the inbox's when it holds the operation, else
	// the report's.
	Amount      string       `json:"amount,omitempty"`
	Currency    string       `json:"currency,omitempty"`
	Differences []Difference `json:"differences,omitempty"`
	// Reversals are the report's rows that reverse the operation (refunds,
	// chargebacks), and Reversed their sum in minor units (positive).
	Reversals []Reversal `json:"reversals,omitempty"`
	Reversed  string     `json:"reversed,omitempty"`
	// Lines are the report's lines of a duplicate_in_report: the first,
	// compared, and this one.
	Lines []int64 `json:"lines,omitempty"`
	// Reason says why a line is invalid, or a duplicate.
	Reason string `json:"reason,omitempty"`
	Note   string `json:"note,omitempty"`
}

// Reversal is one report row that reverses an operation.
type Reversal struct {
	Line int64 `json:"line"`
	// Kind is the row's kind as the report writes it (refund, Chargeback).
	Kind   string `json:"kind"`
	Amount string `json:"amount"`
}

// Detail says in one line why a finding is not matched: the reason of an
// invalid line, the differences (pointer: inbox value, report value), when
// an operation missing from the report was recorded, the amount, the note.
func (f Finding) Detail() string {
	if f.Status == Invalid || f.Status == DuplicateInReport {
		return f.Reason
	}
	var parts []string
	for _, d := range f.Differences {
		name := d.Pointer
		if d.Field != "" {
			name = d.Field
		}
		inbox := "absent"
		if d.Inbox != nil {
			inbox = *d.Inbox
		}
		parts = append(parts, fmt.Sprintf("%s: inbox %s, report %s", name, inbox, d.Report))
	}
	if f.Status == MissingInReport && f.CreatedAt != nil {
		parts = append(parts, "recorded "+f.CreatedAt.UTC().Format(time.RFC3339))
	}
	if f.Amount != "" {
		parts = append(parts, strings.TrimSpace(f.Amount+" "+f.Currency))
	}
	if f.Reversed != "" {
		var kinds []string
		for _, r := range f.Reversals {
			kinds = append(kinds, fmt.Sprintf("%s %s (line %d)", r.Kind, r.Amount, r.Line))
		}
		parts = append(parts, "reversed "+f.Reversed+": "+strings.Join(kinds, ", "))
	}
	if f.Note != "" {
		parts = append(parts, f.Note)
	}
	return strings.Join(parts, "; ")
}

// Totals are the sums of one status's amounts in one currency, as the inbox
// and as the report has them (exact decimals; "" when that side has none).
type Totals struct {
	Inbox  string `json:"inbox,omitempty"`
	Report string `json:"report,omitempty"`
}

// Summary is what a run found, and what it did with it.
type Summary struct {
	Report ReportInfo `json:"report"`
	Class  string     `json:"class"`
	Since  *time.Time `json:"since,omitempty"`
	Until  *time.Time `json:"until,omitempty"`
	// Counts per status.
	Counts map[Status]int64 `json:"counts"`
	// NotCompared counts the findings of Counts (matched, or refunded) of
	// an identity whose body was purged: the inbox holds its tombstone, so
	// no field was compared.
	NotCompared int64 `json:"not_compared"`
	// Amounts per status, then per currency ("" when unknown).
	Amounts map[Status]map[string]Totals `json:"amounts"`
	// EmitFile and Emitted: the resolve batch written (--emit-resolve).
	EmitFile string `json:"emit_file,omitempty"`
	Emitted  int64  `json:"emitted"`
	// RecordFile and RecordLines: the record plan input written
	// (--emit-record), one line per missing_in_inbox operation.
	RecordFile  string `json:"record_file,omitempty"`
	RecordLines int64  `json:"record_lines"`
	// Pinned and AlreadyPinned count the manual corrections recorded
	// (--pin), and the discrepancies a pending correction already pinned.
	Pinned        int64 `json:"pinned"`
	AlreadyPinned int64 `json:"already_pinned"`
	// Withheld says why nothing was emitted or pinned ("" when nothing was
	// withheld).
	Withheld    string    `json:"withheld,omitempty"`
	Interrupted bool      `json:"interrupted,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
	// AuditID is the audit row that records the run (0: not recorded).
	AuditID int64 `json:"audit_id,omitempty"`
}

// Discrepancies counts mismatch, missing_in_inbox, missing_in_report and
// duplicate_in_report.
func (s Summary) Discrepancies() int64 {
	var n int64
	for st, c := range s.Counts {
		if st.Discrepancy() {
			n += c
		}
	}
	return n
}

// Total counts every finding.
func (s Summary) Total() int64 {
	var n int64
	for _, c := range s.Counts {
		n += c
	}
	return n
}

// Currencies returns the currencies of a status's amounts, sorted.
func (s Summary) Currencies(st Status) []string {
	var out []string
	for c := range s.Amounts[st] {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// totals accumulates exact sums per status, currency and side.
type totals struct {
	sums  map[totalsKey]*sum
	upper upperCodes
}

type totalsKey struct {
	status   Status
	currency string
	report   bool
}

// sum is an exact decimal sum and the most decimals it has seen. Amounts
// that fit an int64 at their own scale (almost all: minor units, or a few
// decimals) are summed per scale in int64s; anything else, and a per-scale
// sum that would overflow, goes to an exact rational.
type sum struct {
	small [maxSmallScale + 1]int64
	big   big.Rat
	scale int
}

// maxSmallScale is the most decimals an amount summed in an int64 has.
const maxSmallScale = 18

func (t *totals) add(st Status, s side, report bool) {
	if s.amount == "" || !isDecimal(s.amount) {
		return
	}
	if t.sums == nil {
		t.sums = map[totalsKey]*sum{}
	}
	k := totalsKey{st, t.upper.of(s.currency), report}
	acc := t.sums[k]
	if acc == nil {
		acc = &sum{}
		t.sums[k] = acc
	}
	acc.scale = max(acc.scale, decimalScale(s.amount))
	if v, scale, ok := smallDecimal(s.amount); ok {
		cur := acc.small[scale]
		if r := cur + v; (cur > 0 && v > 0 && r < 0) || (cur < 0 && v < 0 && r >= 0) {
			acc.big.Add(&acc.big, scaled(cur, scale))
			acc.small[scale] = v
		} else {
			acc.small[scale] = r
		}
		return
	}
	if v, ok := new(big.Rat).SetString(s.amount); ok {
		acc.big.Add(&acc.big, v)
	}
}

// smallDecimal reads a decimal without exponent whose digits fit an int64:
// its unscaled value and its scale.
func smallDecimal(s string) (v int64, scale int, ok bool) {
	neg := false
	if s[0] == '+' || s[0] == '-' {
		neg, s = s[0] == '-', s[1:]
	}
	digits, dot := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.':
			dot = true
			continue
		case c < '0' || c > '9' || digits == 18:
			return 0, 0, false
		}
		v = v*10 + int64(c-'0')
		digits++
		if dot {
			scale++
		}
	}
	if neg {
		v = -v
	}
	return v, scale, true
}

// scaled is v / 10^scale.
func scaled(v int64, scale int) *big.Rat {
	return new(big.Rat).SetFrac(big.NewInt(v), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
}

// decimalScale is how many decimals a number's text shows (before any
// exponent).
func decimalScale(s string) int {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return len(s) - i - 1
	}
	return 0
}

// total is the exact sum.
func (acc *sum) total() *big.Rat {
	r := new(big.Rat).Set(&acc.big)
	for scale, v := range acc.small {
		if v != 0 {
			r.Add(r, scaled(v, scale))
		}
	}
	return r
}

// amounts renders the sums for a Summary.
func (t *totals) amounts() map[Status]map[string]Totals {
	out := map[Status]map[string]Totals{}
	for k, acc := range t.sums {
		m := out[k.status]
		if m == nil {
			m = map[string]Totals{}
			out[k.status] = m
		}
		tot := m[k.currency]
		text := acc.total().FloatString(acc.scale)
		if k.report {
			tot.Report = text
		} else {
			tot.Inbox = text
		}
		m[k.currency] = tot
	}
	return out
}
