package cmdutil

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/charmbracelet/x/ansi"
	"github.com/olekukonko/tablewriter"

	"github.com/idemctl/idemctl/internal/term"
)

// columnRole says how a column gives way when a table is wider than the
// terminal. Every table goes through PrintTable, which reads the role of
// each column from its header (columnRoles), so that a new table obeys the
// same rules without a word of its own.
type columnRole struct {
	// identifier: what an operator types next (an id, a tenant, an
	// operation, a group, a source, a class, a plan). Never shortened,
	// never dropped: when one does not fit, the table turns vertical.
	identifier bool
	// explains: the column that says why; it takes the room left and wraps.
	explains bool
	// drop is the order in which columns are hidden when the table does
	// not fit: higher first (absolute times, then relative ages, then
	// counts, then other detail); 0 is never hidden.
	drop int
}

// Drop ranks, most expendable first.
const (
	dropTime   = 4 // an absolute time
	dropAge    = 3 // a relative age or duration
	dropCount  = 2 // a count
	dropDetail = 1 // detail the next command does not need
)

var (
	ident   = columnRole{identifier: true}
	explain = columnRole{explains: true}
	keep    = columnRole{}
)

// columnRoles is the declared role of every column header (lower case).
// A header not named here counts as an identifier: it is never cut, the
// safe default for a column nobody classified.
var columnRoles = map[string]columnRole{
	// identifiers
	"id": ident, "tenant": ident, "operation": ident, "operation_id": ident, "group": ident, "group id": ident,
	"source": ident, "class": ident, "plan": ident, "record": ident, "person": ident, "login": ident,
	"version": ident, "name": ident, "check": ident, "design": ident, "line": ident, "field": ident,
	"step": ident, "path": ident, "target": ident, "actor": ident, "planned by": ident, "approved by": ident,
	"by": ident, "currency": ident, "runs as": ident, "item": ident, "amount": ident, "operation id": ident, "payload hash": ident,
	// field names of field/value tables whose value is typed or compared
	"hash": ident, "stored hash": ident, "incoming hash": ident, "digest": ident,
	"stored_hash": ident, "incoming_hash": ident,
	// what the row is: short words, kept
	"example": ident, "status": ident, "state": keep, "outcome": keep, "verdict": keep, "action": keep, "event": keep,
	"change": keep, "kind": keep, "retention": keep, "effect": keep, "mode": keep, "money": keep,
	// explaining columns: they wrap
	"detail": explain, "details": explain, "meaning": explain, "reason": explain, "value": explain,
	"description": explain, "contract / abort": explain, "incoming": explain, "stored": explain,
	"what to do": explain, "changed": explain, "totals": explain, "evidence": explain, "response": explain, "where": explain,
	// absolute times
	"at": {drop: dropTime}, "first seen": {drop: dropTime}, "last seen": {drop: dropTime},
	"applied at": {drop: dropTime}, "added": {drop: dropTime}, "since": {drop: dropTime},
	"last purge": {drop: dropTime}, "last probe": {drop: dropTime}, "cutoff": {drop: dropTime},
	"oldest replayable": {drop: dropTime}, "created at": {drop: dropTime},
	// relative ages and durations
	"min age": {drop: dropAge}, "oldest body": {drop: dropAge}, "timeout": {drop: dropAge}, "probe": {drop: dropAge},
	// counts
	"seen": {drop: dropCount}, "changes": {drop: dropCount}, "count": {drop: dropCount},
	"candidates": {drop: dropCount}, "pinned": {drop: dropCount}, "purged": {drop: dropCount},
	"ops 1h": {drop: dropCount}, "ops 1d": {drop: dropCount}, "bodies": {drop: dropCount},
	"pins": {drop: dropCount}, "postings": {drop: dropCount}, "operations": {drop: dropCount},
	"trials": {drop: dropCount}, "items": {drop: dropCount}, "inbox amount": {drop: dropCount}, "report amount": {drop: dropCount},
	// other detail
	"db user": {drop: dropDetail}, "retry answer": {drop: dropDetail}, "ran by": {drop: dropDetail}, "operator": {drop: dropDetail}, "decided by": {drop: dropDetail},
	// the lab's anomaly counts
	"lost": {drop: dropCount}, "doubled": {drop: dropCount}, "wrong_response": {drop: dropCount},
	"missed_conflicts": {drop: dropCount}, "false_conflicts": {drop: dropCount}, "lost_revisions": {drop: dropCount},
}

// HasColumnRole reports whether header (any case) has a declared role: every
// table's every column must.
func HasColumnRole(header string) bool {
	_, ok := columnRoles[strings.ToLower(header)]
	return ok
}

// roleOf returns the declared role of a column.
func roleOf(header string) columnRole {
	if r, ok := columnRoles[strings.ToLower(header)]; ok {
		return r
	}
	return ident
}

// PrintTable renders rows under header. On a terminal (the output carries a
// width, LayoutWriter) the table is never wider than the terminal, borders
// included: columns are hidden in their declared order and named on a last
// line ("2 columns hidden (...): -o wide"), the explaining columns wrap, and
// an identifier is never shortened; when an identifier cannot fit even so,
// or a word that cannot wrap (a hash) would cost a column, the rows print
// vertically, one "field: value" line each. -o wide and a pipe: no limit.
func PrintTable(w io.Writer, header []string, rows [][]string) error {
	if lw, ok := w.(*LayoutWriter); ok && lw.Seen != nil {
		var b strings.Builder
		err := PrintTable(&LayoutWriter{Writer: &b, Layout: lw.Layout}, header, rows)
		lw.Seen(header, b.String())
		if err != nil {
			return err
		}
		_, err = io.WriteString(w, b.String())
		return err
	}
	l := LayoutOf(w)
	if l.Width <= 0 {
		return renderTable(w, header, rows, l.NoHeaders)
	}
	// Fitted as the terminal receives it: the output stream escapes what may
	// not reach a terminal raw (U+2028 becomes six cells), and escaping twice
	// changes nothing.
	header, rows = escapeCells(header), slices.Clone(rows)
	for i, r := range rows {
		rows[i] = escapeCells(r)
	}
	fit, ok := fitTable(header, rows, l.Width)
	if !ok {
		return printVertical(w, header, rows, l.Width)
	}
	if err := renderTable(w, fit.header, fit.rows, l.NoHeaders); err != nil {
		return err
	}
	if n := len(fit.hidden); n > 0 {
		noun := map[bool]string{true: "column", false: "columns"}[n == 1]
		line := fmt.Sprintf("%d %s hidden (%s): -o wide", n, noun, strings.Join(fit.hidden, ", "))
		_, err := fmt.Fprintln(w, wrapWords(line, l.Width))
		return err
	}
	return nil
}

func escapeCells(cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = term.Escape(c)
	}
	return out
}

func renderTable(w io.Writer, header []string, rows [][]string, noHeaders bool) error {
	t := tablewriter.NewWriter(w)
	if !noHeaders {
		hdr := make([]any, len(header))
		for i, h := range header {
			hdr[i] = h
		}
		t.Header(hdr...)
	}
	for _, r := range rows {
		if err := t.Append(r); err != nil {
			return err
		}
	}
	return t.Render()
}

// fittedTable is a table made to fit: the columns kept, their cells
// wrapped, and the headers of the columns hidden.
type fittedTable struct {
	header []string
	rows   [][]string
	hidden []string
}

// tableFrame is the width of a table's borders and padding: three cells a
// column and one.
func tableFrame(columns int) int { return 3*columns + 1 }

// cellWidth is the width of the widest line of s.
func cellWidth(s string) int {
	w := 0
	for _, line := range strings.Split(s, "\n") {
		w = max(w, ansi.StringWidth(line))
	}
	return w
}

// isIdentifierCell reports whether row r's cell in column i is an
// identifier: its column is one, or, in a field/value table, its field
// names one ("operation", "tenant").
func isIdentifierCell(header []string, r []string, i int) bool {
	if roleOf(header[i]).identifier {
		return true
	}
	if len(header) == 2 && strings.EqualFold(header[0], "field") && i == 1 && len(r) > 0 {
		role, ok := columnRoles[strings.ToLower(r[0])]
		return ok && role.identifier
	}
	return false
}

// fitTable fits header and rows into width cells, or reports false when an
// identifier cannot fit (the caller prints the rows vertically).
func fitTable(header []string, rows [][]string, width int) (fittedTable, bool) {
	n := len(header)
	natural := make([]int, n) // widest line of the column
	floor := make([]int, n)   // narrowest the column may wrap to
	wrapTo := make([]int, n)  // a comfortable width to wrap to
	word := make([]int, n)    // its widest word: wrapping never cuts one
	for i, h := range header {
		natural[i] = ansi.StringWidth(h)
		floor[i] = natural[i]
	}
	for _, r := range rows {
		for i := 0; i < n && i < len(r); i++ {
			cw := cellWidth(r[i])
			natural[i] = max(natural[i], cw)
			word[i] = max(word[i], min(widestWord(r[i]), wholeWord), widestToken(r[i]))
			if isIdentifierCell(header, r, i) {
				floor[i] = max(floor[i], cw)
			}
		}
	}
	relaxed := make([]int, n) // wrapTo, were every word free to break
	for i, h := range header {
		role := roleOf(h)
		switch {
		case role.identifier:
			floor[i], wrapTo[i], relaxed[i] = natural[i], natural[i], natural[i]
		case role.explains:
			relaxed[i] = min(natural[i], max(min(natural[i], max(floor[i], 12)), 30))
			// A DSN, a setting or a path in a sentence is one word: the
			// column is at least as wide (else the table turns vertical).
			floor[i] = max(min(natural[i], max(floor[i], 12)), word[i])
			wrapTo[i] = min(natural[i], max(floor[i], 30))
		default:
			// a time, an age, a count: whole, or hidden
			floor[i], wrapTo[i], relaxed[i] = natural[i], natural[i], natural[i]
		}
	}
	kept := make([]bool, n)
	for i := range kept {
		kept[i] = true
	}
	sum := func(ws []int) int {
		total, cols := 0, 0
		for i, k := range kept {
			if k {
				total += ws[i]
				cols++
			}
		}
		return total + tableFrame(cols)
	}
	if sum(natural) <= width {
		return fittedTable{header: header, rows: rows}, true
	}
	// Hide columns, most expendable first (the rightmost of a rank first),
	// until the rest fits with its explaining columns wrapped.
	order := make([]int, 0, n)
	for i, h := range header {
		if roleOf(h).drop > 0 {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if d := roleOf(header[b]).drop - roleOf(header[a]).drop; d != 0 {
			return d
		}
		return b - a
	})
	var hidden []int
	for _, i := range order {
		if sum(wrapTo) <= width {
			break
		}
		kept[i] = false
		hidden = append(hidden, i)
	}
	// A word that cannot wrap (a hash) never costs a column: vertical keeps it.
	if k := len(hidden); k > 0 {
		if kept[hidden[k-1]] = true; sum(relaxed) <= width {
			return fittedTable{}, false
		}
		kept[hidden[k-1]] = false
	}
	if sum(floor) > width {
		return fittedTable{}, false
	}
	// Give the room left to the explaining columns, from their floor up to
	// their natural width (the others are whole already).
	widths := append([]int(nil), floor...)
	room := width - sum(floor)
	// Explaining columns share it a cell at a time, so that two of them
	// (a detail and what to do) both stay readable.
	for grew := true; grew && room > 0; {
		grew = false
		for i, h := range header {
			if kept[i] && roleOf(h).explains && widths[i] < natural[i] && room > 0 {
				widths[i]++
				room--
				grew = true
			}
		}
	}
	out := fittedTable{}
	for i, h := range header {
		if kept[i] {
			out.header = append(out.header, h)
		}
	}
	slices.Sort(hidden)
	for _, i := range hidden {
		out.hidden = append(out.hidden, strings.ToLower(header[i]))
	}
	for _, r := range rows {
		cells := make([]string, 0, len(out.header))
		for i := 0; i < n; i++ {
			if !kept[i] {
				continue
			}
			c := ""
			if i < len(r) {
				c = r[i]
			}
			if cellWidth(c) > widths[i] {
				c = wrapWords(c, widths[i])
			}
			cells = append(cells, c)
		}
		out.rows = append(out.rows, cells)
	}
	return out, true
}

// printVertical prints each row as "field: value" lines, a blank line
// between rows: the layout of a table whose identifiers do not fit across.
// Values wrap under their field, except an identifier too wide for the
// line: it stands alone on the next line, whole, for the terminal to fold
// (a copy of it is then the whole identifier).
func printVertical(w io.Writer, header []string, rows [][]string, width int) error {
	labels := make([]string, len(rows)*len(header))
	fieldValue := len(header) == 2 && strings.EqualFold(header[0], "field")
	labelWidth := 0
	for j, r := range rows {
		for i, h := range header {
			label := strings.ToLower(h)
			if fieldValue {
				if i == 0 {
					continue
				}
				label = r[0]
			}
			labels[j*len(header)+i] = label
			labelWidth = max(labelWidth, ansi.StringWidth(label))
		}
	}
	var b strings.Builder
	for j, r := range rows {
		if j > 0 && !fieldValue {
			b.WriteString("\n")
		}
		for i := range header {
			if fieldValue && i == 0 {
				continue
			}
			v := ""
			if i < len(r) {
				v = r[i]
			}
			label := labels[j*len(header)+i]
			prefix := label + ":" + strings.Repeat(" ", labelWidth-ansi.StringWidth(label)+1)
			indent := strings.Repeat(" ", ansi.StringWidth(prefix))
			room := width - ansi.StringWidth(prefix)
			switch {
			case cellWidth(v) <= room:
				b.WriteString(prefix + strings.ReplaceAll(v, "\n", "\n"+indent) + "\n")
			case isIdentifierCell(header, r, i) || room < 12:
				b.WriteString(strings.TrimRight(prefix, " ") + "\n" + v + "\n")
			default:
				// A word wider than the room (a DSN, a path, a hash) stands
				// alone on its line, whole, from the first column (indented,
				// it would pass the width and the terminal would fold it):
				// cut, it could not be copied.
				for k, l := range strings.Split(wrapWholeWords(v, room), "\n") {
					switch fits := ansi.StringWidth(l) <= room; {
					case k == 0 && fits:
						b.WriteString(prefix + l + "\n")
					case k == 0:
						b.WriteString(strings.TrimRight(prefix, " ") + "\n" + l + "\n")
					case fits:
						b.WriteString(indent + l + "\n")
					default:
						b.WriteString(l + "\n")
					}
				}
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// wholeWord is the widest word a column keeps whole: a DSN, a setting's
// name, a short path. A longer one (a JSON document with no space) is cut
// at the column's edge as it wraps, so that the table still fits the
// terminal; a token an operator copies (a hash with its algorithm) never
// is (widestToken): a table that cannot hold it whole turns vertical.
const wholeWord = 40

// tokenRE is a word an operator copies and compares whole, however long: a
// hash with its algorithm (jcs-sha256:<hex>, sha256:<hex>), as a sentence
// may hold it (a comma or a parenthesis after it).
var tokenRE = regexp.MustCompile(`^[(]?[a-z][a-z0-9-]*:[0-9a-f]{32,}[,.;:)]*$`)

// widestToken is the width of the widest token of s (tokenRE), 0 when none.
func widestToken(s string) int {
	w := 0
	for _, word := range strings.Fields(s) {
		if tokenRE.MatchString(word) {
			w = max(w, ansi.StringWidth(word))
		}
	}
	return w
}

// widestWord is the width of the widest space-separated word of s.
func widestWord(s string) int {
	w := 0
	for _, word := range strings.Fields(s) {
		w = max(w, ansi.StringWidth(word))
	}
	return w
}

// wrapWords wraps s at spaces into lines at most width cells wide. Unlike
// ansi.Wrap it never breaks at a hyphen, so an identifier in a sentence
// ("--group g-e33185e2ef13") stays whole on one line; only a word wider than
// the line is cut (fitTable keeps the columns at least as wide as their
// words up to wholeWord cells).
func wrapWords(s string, width int) string {
	return wrap(s, width, true)
}

// wrapWholeWords is wrapWords that never cuts a word: one wider than the
// line stands alone on its line, whole.
func wrapWholeWords(s string, width int) string {
	return wrap(s, width, false)
}

func wrap(s string, width int, cut bool) string {
	if width <= 0 {
		return s
	}
	var out []string
	for _, para := range strings.Split(s, "\n") {
		line, lineW := "", 0
		for _, word := range strings.Fields(para) {
			ww := ansi.StringWidth(word)
			switch {
			case lineW > 0 && lineW+1+ww <= width:
				line, lineW = line+" "+word, lineW+1+ww
				continue
			case lineW > 0:
				out = append(out, line)
			}
			for cut && ww > width {
				out = append(out, ansi.Truncate(word, width, ""))
				word = ansi.TruncateLeft(word, width, "")
				ww = ansi.StringWidth(word)
			}
			line, lineW = word, ww
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}
