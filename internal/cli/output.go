package cli

import (
	"encoding/json"
	"io"

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
	// seen, when set, is told the header and the text of every table
	// printed (tests).
	seen func(header []string, text string)
}

// layoutOf returns the layout w carries (none: no limit, headers on).
func layoutOf(w io.Writer) tableLayout {
	if lw, ok := w.(*layoutWriter); ok {
		return lw.layout
	}
	return tableLayout{}
}
