package governance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Total is what the records of one currency add up to, in the currency's
// major unit (an exact decimal: "1234.50"), over Records records.
type Total struct {
	Currency string `json:"currency"`
	Amount   string `json:"amount"`
	Records  int    `json:"records"`
	// Negative is what the records with a negative amount add up to
	// (NegativeRecords of them), inside Amount: a net total can hide a
	// large amount behind a negative one, so an approver is told.
	Negative        string `json:"negative,omitempty"`
	NegativeRecords int    `json:"negative_records,omitempty"`
}

// String renders a total for a person: "EUR 1,234.50 over 12 records", and
// when some amounts are negative, "EUR 0.00 net over 2 records (1 negative:
// -500.00; the others 500.00)".
func (t Total) String() string {
	noun := "records"
	if t.Records == 1 {
		noun = "record"
	}
	if t.NegativeRecords == 0 {
		return fmt.Sprintf("%s %s over %d %s", t.Currency, groupThousands(t.Amount), t.Records, noun)
	}
	net, _ := new(big.Rat).SetString(t.Amount)
	neg, _ := new(big.Rat).SetString(t.Negative)
	others := "?"
	if net != nil && neg != nil {
		others = groupThousands(formatMajor(new(big.Rat).Sub(net, neg), t.Currency))
	}
	return fmt.Sprintf("%s %s net over %d %s (%d negative: %s; the others %s)", t.Currency, groupThousands(t.Amount),
		t.Records, noun, t.NegativeRecords, groupThousands(t.Negative), others)
}

// withNegative sets t's negative part from a sum (in the major unit) over n
// records; nothing when none or all of its records are negative (the net
// then hides nothing).
func (t Total) withNegative(sum *big.Rat, n int) Total {
	if n > 0 && n < t.Records && sum != nil {
		t.Negative, t.NegativeRecords = formatMajor(sum, t.Currency), n
	}
	return t
}

// MoneyProblem names a record of a money class left out of the totals: its
// amount or currency is missing or unreadable. Ref is the caller's name for
// the record (a quarantine record id, an entry plan item).
type MoneyProblem struct {
	Ref     string `json:"ref"`
	Problem string `json:"problem"`
	// Records is how many records the problem holds when more than one
	// (an import's rows, counted by its seal).
	Records int `json:"records,omitempty"`
}

// String renders the problem for a person.
func (p MoneyProblem) String() string { return p.Ref + ": " + p.Problem + ": not in the totals" }

// Totals adds up the amounts of records of money classes, per currency, by
// each class's declaration. A record whose amount or currency cannot be
// read is named in Problems, never silently left out.
type Totals struct {
	sums, negSums     map[string]*big.Rat
	records, negCount map[string]int
	Problems          []MoneyProblem
}

// Add reads payload's amount and currency by m and adds it; ref names the
// record in a problem. A nil m (the class moves no money) adds nothing.
func (t *Totals) Add(ref string, m *Money, payload []byte) {
	if m == nil {
		return
	}
	amount, currency, err := m.Read(payload)
	if err != nil {
		t.Problems = append(t.Problems, MoneyProblem{Ref: ref, Problem: err.Error()})
		return
	}
	if t.sums == nil {
		t.sums, t.records = map[string]*big.Rat{}, map[string]int{}
		t.negSums, t.negCount = map[string]*big.Rat{}, map[string]int{}
	}
	if t.sums[currency] == nil {
		t.sums[currency], t.negSums[currency] = new(big.Rat), new(big.Rat)
	}
	t.sums[currency].Add(t.sums[currency], amount)
	t.records[currency]++
	if amount.Sign() < 0 {
		t.negSums[currency].Add(t.negSums[currency], amount)
		t.negCount[currency]++
	}
}

// List returns the totals by currency, in currency order.
func (t *Totals) List() []Total {
	out := make([]Total, 0, len(t.sums))
	for c, sum := range t.sums {
		out = append(out, Total{Currency: c, Amount: formatMajor(sum, c), Records: t.records[c]}.withNegative(t.negSums[c], t.negCount[c]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Currency < out[j].Currency })
	return out
}

// decimalText is an amount written as a JSON string: an optional minus,
// digits, and at most one decimal point with digits after it.
var decimalText = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

// Read returns payload's amount in the currency's major unit and its
// currency code, by the declaration's pointers and unit. The amount is a
// JSON number (or a string holding a plain decimal, as some APIs write it);
// in minor units it is a whole number. The currency is an ISO 4217 code.
func (m Money) Read(payload []byte) (*big.Rat, string, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, "", fmt.Errorf("the payload is not JSON: %v", err)
	}
	rawCur, ok := pointerValue(doc, m.Currency)
	if !ok {
		return nil, "", fmt.Errorf("no currency at %s", m.Currency)
	}
	cur, ok := rawCur.(string)
	if !ok {
		return nil, "", fmt.Errorf("the currency at %s is not a string", m.Currency)
	}
	exp, known := MinorUnits(strings.ToUpper(cur))
	if !known || exp == NoMinorUnit {
		return nil, "", fmt.Errorf("the currency %q at %s is not an ISO 4217 currency", cur, m.Currency)
	}
	cur = strings.ToUpper(cur)
	rawAmt, ok := pointerValue(doc, m.Amount)
	if !ok {
		return nil, "", fmt.Errorf("no amount at %s", m.Amount)
	}
	var text string
	switch v := rawAmt.(type) {
	case json.Number:
		text = v.String()
	case string:
		if !decimalText.MatchString(v) {
			return nil, "", fmt.Errorf("the amount at %s is not a number: %q", m.Amount, v)
		}
		text = v
	default:
		return nil, "", fmt.Errorf("the amount at %s is not a number", m.Amount)
	}
	amount, ok := new(big.Rat).SetString(text)
	if !ok || len(text) > 64 {
		return nil, "", fmt.Errorf("the amount at %s is not a number: %s", m.Amount, text)
	}
	if m.Unit == Minor {
		if !amount.IsInt() {
			return nil, "", fmt.Errorf("the amount at %s is %s: not a whole number of minor units", m.Amount, text)
		}
		amount.Quo(amount, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(exp)), nil)))
	}
	return amount, cur, nil
}

// pointerValue returns the value at RFC 6901 pointer p of doc.
func pointerValue(doc any, p string) (any, bool) {
	if p == "" {
		return doc, true
	}
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	cur := doc
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) || (len(tok) > 1 && tok[0] == '0') {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, cur != nil
}

// formatMajor writes sum with the currency's decimals, or more when an
// amount in major units carried more (nothing is rounded away).
func formatMajor(sum *big.Rat, currency string) string {
	exp, _ := MinorUnits(currency)
	digits := max(exp, 0)
	for digits < 18 {
		scaled := new(big.Rat).Mul(sum, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(digits)), nil)))
		if scaled.IsInt() {
			break
		}
		digits++
	}
	return sum.FloatString(digits)
}

// groupThousands puts a comma between each group of three integer digits:
// "1234567.50" becomes "1,234,567.50".
func groupThousands(s string) string {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	intPart, frac, hasFrac := strings.Cut(s, ".")
	var b strings.Builder
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if hasFrac {
		return sign + b.String() + "." + frac
	}
	return sign + b.String()
}
