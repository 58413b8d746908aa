package cli

import (
	"encoding/json"
	"io"

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

// printTable renders rows under header.
func printTable(w io.Writer, header []string, rows [][]string) error {
	t := tablewriter.NewWriter(w)
	hdr := make([]any, len(header))
	for i, h := range header {
		hdr[i] = h
	}
	t.Header(hdr...)
	for _, r := range rows {
		if err := t.Append(r); err != nil {
			return err
		}
	}
	return t.Render()
}
