package quarantine

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/idem"
)

var (
	//go:embed sql/filter.sql
	filterSQL string
	//go:embed sql/list.sql
	listSQLFile string
	//go:embed sql/count.sql
	countSQLFile string

	listSQL  = withFilter(listSQLFile)
	countSQL = withFilter(countSQLFile)
)

// withFilter splices the shared predicate of sql/filter.sql (without its
// header comment) where a query says /*FILTER*/.
func withFilter(query string) string {
	var pred []string
	for _, line := range strings.Split(filterSQL, "\n") {
		if !strings.HasPrefix(line, "--") && strings.TrimSpace(line) != "" {
			pred = append(pred, line)
		}
	}
	return strings.ReplaceAll(query, "/*FILTER*/", "("+strings.TrimSpace(strings.Join(pred, "\n"))+")")
}

// Cursor is a keyset position in the newest-activity-first order.
type Cursor struct {
	LastSeen time.Time
	ID       int64
}

// String renders the cursor as ParseCursor reads it: microseconds since the
// epoch of last_seen (the database's precision), a colon, the id.
func (c Cursor) String() string {
	return strconv.FormatInt(c.LastSeen.UnixMicro(), 10) + ":" + strconv.FormatInt(c.ID, 10)
}

// ParseCursor reads a cursor printed by List.
func ParseCursor(s string) (Cursor, error) {
	us, id, ok := strings.Cut(s, ":")
	micros, err1 := strconv.ParseInt(us, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if !ok || err1 != nil || err2 != nil || n <= 0 {
		return Cursor{}, fmt.Errorf("%w: cursor %q: use the cursor printed by the previous page", ErrInvalidFilter, s)
	}
	return Cursor{LastSeen: time.UnixMicro(micros).UTC(), ID: n}, nil
}

// Filter selects records for List, Count, Groups and the bulk decisions. Zero
// values mean no filter; every filter is evaluated by the database, with an
// index (migrations/004_quarantine_triage.sql).
type Filter struct {
	// Status is open, rejected, accepted or all; empty means open.
	Status Status `json:"status"`
	Tenant string `json:"tenant,omitempty"`
	// Op is an exact operation_id; OpPrefix a prefix of it (byte order).
	Op       string `json:"operation_id,omitempty"`
	OpPrefix string `json:"operation_id_prefix,omitempty"`
	// Class matches the stored or the incoming class.
	Class string `json:"class,omitempty"`
	// Changed is the JSON Pointer (RFC 6901) of a value that differs
	// between the stored and the incoming payload ("/amount").
	Changed string `json:"changed,omitempty"`
	// Source is the incoming transport's "source" (else its "topic").
	Source string `json:"source,omitempty"`
	// Since and Until bound last_seen (the latest arrival): since <= last_seen < until.
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// Group restricts to one group of Groups exactly (ResolveGroup sets it).
	Group *GroupKey `json:"group,omitempty"`
	// After resumes after a record of a previous page.
	After *Cursor `json:"-"`
	// Limit is the page size (DefaultLimit when 0, at most MaxLimit).
	Limit int `json:"-"`
}

// Narrowed reports whether the filter names something to narrow on besides
// the status: a bulk decision refuses a filter that would take every record.
func (f Filter) Narrowed() bool {
	return f.Tenant != "" || f.Op != "" || f.OpPrefix != "" || f.Class != "" || f.Changed != "" || f.Source != "" ||
		!f.Since.IsZero() || !f.Until.IsZero() || f.Group != nil
}

// Validate checks the filter before anything is sent; each error names the
// flag and says what to use.
func (f Filter) Validate() error {
	if f.Status != "" {
		if _, err := ParseStatus(string(f.Status)); err != nil {
			return err
		}
	}
	if f.Limit < 0 || f.Limit > MaxLimit {
		return fmt.Errorf("%w: --limit must be between 1 and %d", ErrInvalidFilter, MaxLimit)
	}
	if f.Op != "" && f.OpPrefix != "" {
		return fmt.Errorf("%w: --op and --op-prefix exclude each other: give one", ErrInvalidFilter)
	}
	for flag, v := range map[string]string{"--op": f.Op, "--op-prefix": f.OpPrefix} {
		if v == "" {
			continue
		}
		if err := (idem.Identity{TenantID: "t", OperationID: v}).Validate(); err != nil {
			return fmt.Errorf("%w: %s %q: 1-256 bytes without control characters", ErrInvalidFilter, flag, v)
		}
	}
	for flag, v := range map[string]string{"--tenant": f.Tenant, "--class": f.Class, "--source": f.Source} {
		if v != "" {
			if err := idem.CheckText(flag, v, 256); err != nil {
				return fmt.Errorf("%w: %v", ErrInvalidFilter, err)
			}
		}
	}
	if f.Changed != "" {
		if err := CheckPointer(f.Changed); err != nil {
			return fmt.Errorf("%w: --changed %q: %v", ErrInvalidFilter, f.Changed, err)
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return fmt.Errorf("%w: --since (%s) must be before --until (%s)", ErrInvalidFilter,
			f.Since.UTC().Format(time.RFC3339), f.Until.UTC().Format(time.RFC3339))
	}
	return nil
}

// CheckPointer checks an RFC 6901 JSON Pointer naming a value inside the
// payload: "/" then reference tokens separated by "/", "~" only as ~0 or ~1.
func CheckPointer(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf(`a JSON Pointer starts with "/" (e.g. /amount, /items/0/price)`)
	}
	if len(p) > 1024 {
		return fmt.Errorf("longer than 1024 bytes")
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return fmt.Errorf(`"~" must be written ~0, and "/" inside a name ~1`)
		}
		if p[i] < 0x20 || p[i] == 0x7f {
			return fmt.Errorf("contains a control character")
		}
	}
	return nil
}

// args are the named arguments of sql/filter.sql for f.
func (f Filter) args() pgx.NamedArgs {
	status := f.Status
	if status == "" {
		status = StatusOpen
	}
	a := pgx.NamedArgs{
		"status": string(status), "tenant": nullIfEmpty(f.Tenant), "op": nullIfEmpty(f.Op), "op_like": nil,
		"class": nullIfEmpty(f.Class), "changed": nil, "source": nullIfEmpty(f.Source),
		"since": nullTime(f.Since), "until": nullTime(f.Until),
		"g_class": nil, "g_incoming": nil, "g_fields": nil, "max_id": nil,
	}
	if f.OpPrefix != "" {
		a["op_like"] = likePrefix(f.OpPrefix)
	}
	if f.Changed != "" {
		b, _ := json.Marshal([]string{f.Changed})
		a["changed"] = string(b)
	}
	if g := f.Group; g != nil {
		fields, _ := json.Marshal(append([]string{}, g.Fields...))
		a["g_class"], a["g_incoming"], a["g_fields"] = g.Class, g.IncomingClass, string(fields)
		if g.Tenant != nil {
			a["tenant"] = *g.Tenant
		}
		if g.Source != nil {
			a["source"] = *g.Source
		}
	}
	return a
}

// Describe writes the filter the way the flags spell it, for a preview.
func (f Filter) Describe() string {
	status := f.Status
	if status == "" {
		status = StatusOpen
	}
	parts := []string{"status " + string(status)}
	add := func(flag, v string) {
		if v != "" {
			parts = append(parts, flag+" "+strconv.Quote(v))
		}
	}
	add("--tenant", f.Tenant)
	add("--op", f.Op)
	add("--op-prefix", f.OpPrefix)
	add("--class", f.Class)
	add("--changed", f.Changed)
	add("--source", f.Source)
	if !f.Since.IsZero() {
		add("--since", f.Since.UTC().Format(time.RFC3339))
	}
	if !f.Until.IsZero() {
		add("--until", f.Until.UTC().Format(time.RFC3339))
	}
	if g := f.Group; g != nil {
		parts = append(parts, "group ("+g.Describe()+")")
	}
	return strings.Join(parts, ", ")
}

// likePrefix is a LIKE pattern matching the strings that start with p.
func likePrefix(p string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p) + "%"
}

// Page is one page of List.
type Page struct {
	Items []Summary
	// Next is the cursor of the following page; nil on the last page.
	Next *Cursor
}

// List returns records newest activity first, one keyset page at a time.
func List(ctx context.Context, db idem.DBTX, f Filter) (Page, error) {
	if err := f.Validate(); err != nil {
		return Page{}, err
	}
	if f.Limit == 0 {
		f.Limit = DefaultLimit
	}
	args := f.args()
	args["after_seen"], args["after_id"] = nil, nil
	if f.After != nil {
		args["after_seen"], args["after_id"] = f.After.LastSeen, f.After.ID
	}
	// One row more than asked tells whether there is a next page. An unnamed
	// statement (QueryExecModeExec) is planned with the actual values, so the
	// optional filters fold away and each combination gets its index.
	args["limit"] = f.Limit + 1
	rows, err := db.Query(ctx, listSQL, pgx.QueryExecModeExec, args)
	if err != nil {
		return Page{}, fmt.Errorf("list quarantine: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Summary, error) {
		var s Summary
		var decidedBy, newOp, decidedPerson, decidedDBUser *string
		err := r.Scan(&s.ID, &s.Tenant, &s.OperationID, &s.Class, &s.IncomingClass, &s.Status, &s.Occurrences,
			&s.FirstSeen, &s.LastSeen, &s.Changes, &s.DecidedAt, &decidedBy, &newOp, &decidedPerson, &decidedDBUser, &s.StoredSide)
		s.DecidedBy, s.NewOperationID = deref(decidedBy), deref(newOp)
		s.DecidedPerson, s.DecidedDBUser = deref(decidedPerson), deref(decidedDBUser)
		s.Cursor = Cursor{LastSeen: s.LastSeen, ID: s.ID}.String()
		return s, err
	})
	if err != nil {
		return Page{}, fmt.Errorf("list quarantine: %w", err)
	}
	page := Page{Items: items}
	if len(items) > f.Limit {
		page.Items = items[:f.Limit]
		last := page.Items[f.Limit-1]
		page.Next = &Cursor{LastSeen: last.LastSeen, ID: last.ID}
	}
	return page, nil
}

// CountCap is where Count stops counting: a total of CountCap means "at
// least", so that counting what a broad filter matches over a million
// records stays cheap (BENCHMARKS.md).
const CountCap = 10_000

// Totals is what Count says of a filter.
type Totals struct {
	// Matching is the number of records the filter matches (ignoring the
	// cursor), at most CountCap; AtLeast is true when it stopped there.
	Matching int64 `json:"matching"`
	AtLeast  bool  `json:"at_least,omitempty"`
	// OldestOpen is the first_seen of the oldest open record matching the
	// filter; nil when none is open.
	OldestOpen *time.Time `json:"oldest_open,omitempty"`
}

// Count counts the records a filter matches and finds the oldest open one.
func Count(ctx context.Context, db idem.DBTX, f Filter) (Totals, error) {
	if err := f.Validate(); err != nil {
		return Totals{}, err
	}
	args := f.args()
	args["cap"] = CountCap
	var t Totals
	if err := db.QueryRow(ctx, countSQL, pgx.QueryExecModeExec, args).Scan(&t.Matching, &t.OldestOpen); err != nil {
		return Totals{}, fmt.Errorf("count quarantine: %w", err)
	}
	t.AtLeast = t.Matching >= CountCap
	return t, nil
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
