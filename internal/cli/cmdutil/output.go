package cmdutil

import (
	"encoding/json"
	"io"

	"github.com/idemctl/idemctl/internal/term"
)

// PrintJSONLine writes v as one line of JSON.
func PrintJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(term.EscapeJSON(b), '\n')
	_, err = w.Write(b)
	return err
}

// TableLayout is how tables are drawn on one output: the width they must fit
// (0: no limit), and whether the header row is left out (--no-headers).
type TableLayout struct {
	Width     int
	NoHeaders bool
}

// LayoutWriter is standard output carrying its table layout, so that every
// table printed to it fits (PrintTable) without each command passing the
// terminal's width along.
type LayoutWriter struct {
	io.Writer
	Layout TableLayout
	// seen, when set, is told the header and the text of every table
	// printed (tests).
	Seen func(header []string, text string)
}

// LayoutOf returns the layout w carries (none: no limit, headers on).
func LayoutOf(w io.Writer) TableLayout {
	if lw, ok := w.(*LayoutWriter); ok {
		return lw.Layout
	}
	return TableLayout{}
}
