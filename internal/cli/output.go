package cli

import (
	"encoding/json"
	"io"
	"strings"

	"github.com/charmbracelet/x/ansi"
	"github.com/olekukonko/tablewriter"

	"github.com/idemctl/idemctl/internal/term"
)

// printJSONLine writes v as one line of JSON.
func printJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(term.EscapeJSON(b), '\n')
	_, err = w.Write(b)
	return err
}

// tableLayout is how tables are drawn on one output: the width they must fit
// (0: no limit), and whether the header row is left out (--no-headers).
type tableLayout struct {
	Width     int
	NoHeaders bool
}

// layoutWriter is standard output carrying its table layout, so that every
// table printed to it fits (printTable) without each command passing the
// terminal's width along.
type layoutWriter struct {
	io.Writer
	layout tableLayout
}

// layoutOf returns the layout w carries (none: no limit, headers on).
func layoutOf(w io.Writer) tableLayout {
	if lw, ok := w.(*layoutWriter); ok {
		return lw.layout
	}
	return tableLayout{}
}

// printTable renders rows under header, fitted to the output's width: the
// explanatory column (explanatory) wraps, the others are shortened with "…",
// widest first; -o wide and a pipe have no width limit.
func printTable(w io.Writer, header []string, rows [][]string) error {
	l := layoutOf(w)
	if l.Width > 0 {
		rows = fitTable(header, rows, l.Width)
	}
	t := tablewriter.NewWriter(w)
	if !l.NoHeaders {
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

// explanatory are the headers of the columns that say why: they wrap rather
// than lose their end.
var explanatory = map[string]bool{"detail": true, "details": true, "meaning": true, "reason": true, "value": true,
	"description": true, "contract / abort": true, "incoming": true, "stored": true}

// fitTable shortens and wraps cells so that the table, with its borders
// (three cells of frame per column and one), is at most width wide.
func fitTable(header []string, rows [][]string, width int) [][]string {
	n := len(header)
	if n == 0 {
		return rows
	}
	natural := make([]int, n)
	for i, h := range header {
		natural[i] = ansi.StringWidth(h)
	}
	for _, r := range rows {
		for i := 0; i < n && i < len(r); i++ {
			for _, line := range strings.Split(r[i], "\n") {
				natural[i] = max(natural[i], ansi.StringWidth(line))
			}
		}
	}
	avail := width - 3*n - 1
	sum := 0
	for _, w := range natural {
		sum += w
	}
	if sum <= avail {
		return rows
	}
	expl := n - 1
	for i := n - 1; i >= 0; i-- {
		if explanatory[strings.ToLower(header[i])] {
			expl = i
			break
		}
	}
	widths := append([]int(nil), natural...)
	others := sum - natural[expl]
	// shrink narrows the widest other column, one cell at a time, down to
	// floor, until the table fits with the explanatory column at want.
	shrink := func(want int, floor func(i int) int) {
		for others+want > avail {
			widest := -1
			for i := range widths {
				if i != expl && widths[i] > floor(i) && (widest < 0 || widths[i] > widths[widest]) {
					widest = i
				}
			}
			if widest < 0 {
				return
			}
			widths[widest]--
			others--
		}
	}
	header1 := func(i int) int { return ansi.StringWidth(header[i]) }
	// First the others give way to an explanatory column of up to 30 cells,
	// down to 6 cells (or their header); then it narrows, down to 8; then
	// the others again, down to their headers.
	shrink(min(natural[expl], 30), func(i int) int { return min(natural[i], max(header1(i), 6)) })
	widths[expl] = min(natural[expl], max(avail-others, min(natural[expl], 8)))
	shrink(widths[expl], header1)
	out := make([][]string, len(rows))
	for j, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			switch {
			case i >= n || widths[i] >= natural[i]:
				cells[i] = c
			case i == expl:
				cells[i] = ansi.Wrap(c, widths[i], "")
			default:
				lines := strings.Split(c, "\n")
				for k, line := range lines {
					lines[k] = ansi.Truncate(line, widths[i], "…")
				}
				cells[i] = strings.Join(lines, "\n")
			}
		}
		out[j] = cells
	}
	return out
}
