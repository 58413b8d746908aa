package reconcile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemctl/idemctl/idem"
)

// ErrInvalidMapping: the mapping (flags or a saved mapping file) cannot be
// used; nothing was read or written.
var ErrInvalidMapping = errors.New("invalid reconcile mapping")

// Format is a report's format.
type Format string

// Formats. Auto picks NDJSON when the first character is "{", else CSV.
const (
	FormatAuto   Format = ""
	FormatCSV    Format = "csv"
	FormatNDJSON Format = "ndjson"
)

// Default JSON Pointers of the amount and the currency in a stored payload
// (the demo ledger's shape), used for the summary's totals.
const (
	DefaultAmount   = "/amount"
	DefaultCurrency = "/currency"
)

// Mapping says how a report maps onto one class's inbox. Its fields use the
// syntax of the command's flags, so that a saved mapping file (JSON, see
// LoadMapping) reads like the command line it replaces.
type Mapping struct {
	// Name is a title for the TUI's list (optional).
	Name string `json:"name,omitempty"`
	// Class is the operation class reconciled.
	Class string `json:"class"`
	// Report is the report file ("-" for standard input). In a mapping file,
	// a relative path is relative to the file's directory.
	Report string `json:"report"`
	// Format is csv or ndjson; empty means detected from the content.
	Format Format `json:"format,omitempty"`
	// Delimiter is the CSV field separator (default ",").
	Delimiter string `json:"delimiter,omitempty"`
	// Key maps the identity: "tenant=COLUMN,operation_id=COLUMN". A column
	// is a CSV header name; in NDJSON a member name or a JSON Pointer.
	Key string `json:"key"`
	// Tenant is a fixed tenant for reports that carry none (instead of
	// tenant= in Key).
	Tenant string `json:"tenant,omitempty"`
	// Compare maps stored payload fields to report columns:
	// "/amount=amount_minor,/currency=currency".
	Compare string `json:"compare,omitempty"`
	// Amount and Currency are the JSON Pointers of the amount and currency in
	// the stored payload (defaults /amount and /currency). The column mapped
	// to Amount must be a number on every line.
	Amount   string `json:"amount,omitempty"`
	Currency string `json:"currency,omitempty"`
	// Since and Until bound created_at of the inbox operations the report
	// must hold (since inclusive, until exclusive): a date (UTC midnight),
	// an RFC 3339 time, "today" or "yesterday" (UTC). Empty: unbounded.
	Since string `json:"since,omitempty"`
	Until string `json:"until,omitempty"`
	// Profile names a built-in profile (stripe-balance-itemized,
	// adyen-settlement), ProfileFile a user's; the mapping's own fields win
	// over it.
	Profile     string `json:"profile,omitempty"`
	ProfileFile string `json:"profile_file,omitempty"`
	Rows
	// withReference reads ReferenceColumn (Run sets it for --emit-record
	// only: a run that writes no evidence does not carry the column).
	withReference bool
}

// Rows says how a report writes its rows beyond the key and the compared
// columns: a profile's fields, which a mapping may also set itself.
type Rows struct {
	// DecimalSeparator is "." (default) or ",".
	DecimalSeparator string `json:"decimal_separator,omitempty"`
	// AmountUnit is "minor" (1250, the default) or "major" (12.50: the
	// currency's ISO 4217 exponent converts it, MinorUnits overriding).
	AmountUnit string `json:"amount_unit,omitempty"`
	// MinorUnits overrides the ISO 4217 exponent of a currency, for a
	// provider that writes it otherwise ({"HUF": 0}).
	MinorUnits map[string]int `json:"minor_units,omitempty"`
	// Where keeps the rows whose column holds one of the values
	// ("reporting_category=charge|refund"); every condition must hold.
	Where []string `json:"where,omitempty"`
	// KindColumn holds a row's kind; a row whose kind is one of
	// ReversalKinds reverses the operation it references (a refund, a
	// chargeback) and is reported with it, not compared as one.
	KindColumn    string   `json:"kind_column,omitempty"`
	ReversalKinds []string `json:"reversal_kinds,omitempty"`
	// Negate names the columns whose amounts count negative (a debit).
	Negate []string `json:"negate,omitempty"`
	// ReferenceColumn holds the provider's own reference of a row (Stripe's
	// balance_transaction_id, Adyen's Psp Reference): evidence written with
	// --emit-record, and read only then. Optional: a report without the
	// column has none.
	ReferenceColumn string `json:"reference_column,omitempty"`
}

// condition is one row filter: the row's column holds one of values.
type condition struct {
	column string
	values []string
}

// Field maps one JSON Pointer of the stored payload to a report column.
type Field struct {
	Pointer string `json:"pointer"`
	Column  string `json:"column"`
	tokens  []string
	// alts are the columns of Column "A|B": the first one not empty on a
	// line is the value (a credit or a debit column).
	alts []string
}

// plan is a mapping checked and parsed.
type plan struct {
	Mapping
	upper            upperCodes // the report's currency codes, upper-cased
	tenantCol, opCol string     // tenantCol is "" with a fixed tenant
	fields           []Field
	amount, currency int // index in fields of the amount and currency columns, -1 when unmapped
	amountTokens     []string
	currencyTokens   []string
	since, until     *time.Time
	delimiter        rune
	major            bool // amounts in major units
	decimalComma     bool // "12,50"
	kindSlot         int  // the slot of KindColumn, -1 without
	refSlot          int  // the slot of ReferenceColumn, -1 without
	where            []condition
	whereSlot        int // the slot of the first condition
	reversal         map[string]bool
	negate           map[string]bool
}

// slots returns the columns read from every line, each a list of
// alternatives: the tenant (nil with a fixed tenant), the operation, each
// compared field, then the kind column and the filters' columns.
func (p *plan) slots() [][]string {
	out := [][]string{nil, {p.opCol}}
	if p.tenantCol != "" {
		out[0] = []string{p.tenantCol}
	}
	for _, f := range p.fields {
		out = append(out, f.alts)
	}
	if p.refSlot >= 0 {
		out = append(out, []string{p.ReferenceColumn})
	}
	if p.KindColumn != "" {
		out = append(out, []string{p.KindColumn})
	}
	for _, c := range p.where {
		out = append(out, []string{c.column})
	}
	return out
}

// Plan is a checked mapping, what Run and the TUI work from.
type Plan struct{ p *plan }

// Window returns the created_at bounds (nil: unbounded).
func (p Plan) Window() (since, until *time.Time) { return p.p.since, p.p.until }

// Check parses and checks a mapping; now resolves "today" and "yesterday".
func (m Mapping) Check(now time.Time) (Plan, error) {
	p, err := m.compile(now)
	if err != nil {
		return Plan{}, err
	}
	return Plan{p: p}, nil
}

func (m Mapping) compile(now time.Time) (*plan, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidMapping, fmt.Sprintf(format, args...))
	}
	if m.Class == "" {
		return nil, bad("a class is required (--class)")
	}
	if m.Report == "" {
		return nil, bad("a report is required (--report FILE, - for stdin)")
	}
	m, err := m.withProfile()
	if err != nil {
		return nil, bad("%v", err)
	}
	p := &plan{Mapping: m, amount: -1, currency: -1, delimiter: ',', kindSlot: -1, refSlot: -1}
	if err := p.parseKey(); err != nil {
		return nil, bad("%v", err)
	}
	if err := p.parseCompare(); err != nil {
		return nil, bad("%v", err)
	}
	if err := p.parseFormat(); err != nil {
		return nil, bad("%v", err)
	}
	if err := p.parseProfile(); err != nil {
		return nil, bad("%v", err)
	}
	if p.since, err = parseWindowTime("--since", m.Since, now); err != nil {
		return nil, bad("%v", err)
	}
	if p.until, err = parseWindowTime("--until", m.Until, now); err != nil {
		return nil, bad("%v", err)
	}
	if p.since != nil && p.until != nil && !p.since.Before(*p.until) {
		return nil, bad("--since %s is not before --until %s", m.Since, m.Until)
	}
	return p, nil
}

// parseKey reads "tenant=COL,operation_id=COL" (tenant may be replaced by a
// fixed Tenant).
func (p *plan) parseKey() error {
	pairs, err := splitPairs("--key", p.Key)
	if err != nil {
		return err
	}
	for _, kv := range pairs {
		switch kv[0] {
		case "tenant", "tenant_id":
			p.tenantCol = kv[1]
		case "operation_id", "op":
			p.opCol = kv[1]
		default:
			return fmt.Errorf("--key %q: want tenant=COLUMN,operation_id=COLUMN", kv[0])
		}
	}
	switch {
	case p.opCol == "":
		return fmt.Errorf("--key needs operation_id=COLUMN (e.g. --key tenant=merchant,operation_id=reference)")
	case p.tenantCol != "" && p.Tenant != "":
		return fmt.Errorf("give the tenant once: tenant= in --key, or --tenant")
	case p.tenantCol == "" && p.Tenant == "":
		return fmt.Errorf("--key needs tenant=COLUMN, or give a fixed --tenant")
	case p.Tenant != "":
		if err := (idem.Identity{TenantID: p.Tenant, OperationID: "x"}).Validate(); err != nil {
			return fmt.Errorf("--tenant: %v", err)
		}
	}
	return nil
}

// parseCompare reads "/ptr=COL,..." and finds the amount and currency.
func (p *plan) parseCompare() error {
	pairs, err := splitPairs("--compare", p.Compare)
	if err != nil && p.Compare != "" {
		return err
	}
	amount, currency := orDefault(p.Amount, DefaultAmount), orDefault(p.Currency, DefaultCurrency)
	if p.amountTokens, err = parsePointer(amount); err != nil {
		return fmt.Errorf("--amount: %v", err)
	}
	if p.currencyTokens, err = parsePointer(currency); err != nil {
		return fmt.Errorf("--currency: %v", err)
	}
	seen := map[string]bool{}
	for _, kv := range pairs {
		tokens, err := parsePointer(kv[0])
		if err != nil {
			return fmt.Errorf("--compare %s: %v", kv[0], err)
		}
		if seen[kv[0]] {
			return fmt.Errorf("--compare maps %s twice", kv[0])
		}
		seen[kv[0]] = true
		switch kv[0] {
		case amount:
			p.amount = len(p.fields)
		case currency:
			p.currency = len(p.fields)
		}
		alts := strings.Split(kv[1], "|")
		for i := range alts {
			if alts[i] = strings.TrimSpace(alts[i]); alts[i] == "" {
				return fmt.Errorf("--compare %s=%s: an empty column", kv[0], kv[1])
			}
		}
		p.fields = append(p.fields, Field{Pointer: kv[0], Column: kv[1], tokens: tokens, alts: alts})
	}
	return nil
}

func (p *plan) parseFormat() error {
	switch p.Format {
	case FormatAuto, FormatCSV, FormatNDJSON:
	default:
		return fmt.Errorf("--format %q: use csv or ndjson", p.Format)
	}
	if p.Delimiter != "" {
		r, n := utf8.DecodeRuneInString(p.Delimiter)
		if n != len(p.Delimiter) || r == '"' || r == '\n' || r == '\r' || r == utf8.RuneError {
			return fmt.Errorf("--delimiter %q: one character, not a quote or a newline", p.Delimiter)
		}
		p.delimiter = r
	}
	return nil
}

// parseProfile checks the amount unit, the decimal separator, the filters,
// the kinds and the minor-unit overrides.
func (p *plan) parseProfile() error {
	switch p.AmountUnit {
	case "", "minor":
	case "major":
		if p.amount < 0 || p.currency < 0 {
			return fmt.Errorf("--amount-unit major needs the amount and the currency compared (--compare %s=COLUMN,%s=COLUMN)",
				orDefault(p.Amount, DefaultAmount), orDefault(p.Currency, DefaultCurrency))
		}
		p.major = true
	default:
		return fmt.Errorf("--amount-unit %q: use major or minor", p.AmountUnit)
	}
	switch p.DecimalSeparator {
	case "", ".":
	case ",":
		if p.delimiter == ',' {
			return fmt.Errorf("a decimal comma needs another --delimiter (; or a tab)")
		}
		p.decimalComma = true
	default:
		return fmt.Errorf("decimal separator %q: use . or ,", p.DecimalSeparator)
	}
	for code, e := range p.MinorUnits {
		if _, ok := MinorUnits(strings.ToUpper(code)); !ok || e < 0 || e > 6 {
			return fmt.Errorf("minor_units %s=%d: an ISO 4217 code and an exponent from 0 to 6", code, e)
		}
	}
	n := 2 + len(p.fields)
	if p.ReferenceColumn = strings.TrimSpace(p.ReferenceColumn); p.ReferenceColumn != "" && p.withReference {
		p.refSlot, n = n, n+1
	}
	if p.KindColumn != "" {
		p.kindSlot, n = n, n+1
	} else if len(p.ReversalKinds) > 0 {
		return fmt.Errorf("reversal kinds need the kind column (kind_column)")
	}
	p.reversal = map[string]bool{}
	for _, k := range p.ReversalKinds {
		p.reversal[strings.ToLower(k)] = true
	}
	p.negate = map[string]bool{}
	for _, c := range p.Negate {
		p.negate[c] = true
	}
	p.whereSlot = n
	for _, w := range p.Where {
		col, vals, ok := strings.Cut(w, "=")
		col = strings.TrimSpace(col)
		if !ok || col == "" {
			return fmt.Errorf("--where %q: want COLUMN=VALUE or COLUMN=V1|V2", w)
		}
		c := condition{column: col}
		for _, v := range strings.Split(vals, "|") {
			c.values = append(c.values, strings.TrimSpace(v))
		}
		p.where = append(p.where, c)
	}
	return nil
}

// keep reports whether a line's filter values (one per condition) pass.
func (p *plan) keep(values []string) bool {
	for i, c := range p.where {
		ok := false
		for _, v := range c.values {
			if strings.EqualFold(values[i], v) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// splitPairs reads "a=b,c=d".
func splitPairs(flag, s string) ([][2]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%s is empty", flag)
	}
	var out [][2]string
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%s: %q is not NAME=COLUMN", flag, part)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// parseWindowTime reads a window bound.
func parseWindowTime(flag, s string, now time.Time) (*time.Time, error) {
	day := func(t time.Time) *time.Time {
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		return &d
	}
	switch s {
	case "":
		return nil, nil
	case "today":
		return day(now.UTC()), nil
	case "yesterday":
		return day(now.UTC().AddDate(0, 0, -1)), nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return &t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, fmt.Errorf("%s %q: want a date (2026-11-01, UTC), an RFC 3339 time, today or yesterday", flag, s)
	}
	return &t, nil
}

// LoadMapping reads a saved mapping: a JSON object with the fields of
// Mapping (class, report, key, compare, ...). Unknown fields are refused (a
// typo must not silently drop a comparison). A relative report path is taken
// relative to the file's directory.
func LoadMapping(path string) (Mapping, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Mapping{}, fmt.Errorf("%w: %v", ErrInvalidMapping, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m Mapping
	if err := dec.Decode(&m); err != nil {
		return Mapping{}, fmt.Errorf("%w: %s: %v", ErrInvalidMapping, path, err)
	}
	if m.Report != "" && m.Report != "-" && !filepath.IsAbs(m.Report) {
		m.Report = filepath.Join(filepath.Dir(path), m.Report)
	}
	if m.Name == "" {
		m.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	return m, nil
}

// SaveMapping writes m as a mapping file; an existing file is replaced only
// with overwrite.
func SaveMapping(path string, m Mapping, overwrite bool) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if overwrite {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return fmt.Errorf("save mapping: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("save mapping: %w", err)
	}
	return f.Close()
}

// ListMappings reads every *.json mapping in dir, sorted by file name. A
// file that cannot be read is returned with its error in Err.
func ListMappings(dir string) ([]SavedMapping, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	out := make([]SavedMapping, 0, len(paths))
	for _, path := range paths {
		m, err := LoadMapping(path)
		out = append(out, SavedMapping{Path: path, Mapping: m, Err: err})
	}
	return out, nil
}

// SavedMapping is a mapping file.
type SavedMapping struct {
	Path    string
	Mapping Mapping
	Err     error
}
