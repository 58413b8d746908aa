package reconcile

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/idemctl/idemctl/idem"
)

// csvReader returns the function reading the next CSV data line; cols are
// the alternative columns of each slot of the plan.
func (r *reportReader) csvReader(cr *csv.Reader, cols [][]int) func() (line, error) {
	slots := r.p.slots()
	var slab []string // the lines' values, carved from one allocation
	return func() (line, error) {
		for {
			rec, err := cr.Read()
			if ferr := r.body.fatal(); ferr != nil {
				return line{}, ferr
			}
			if err == io.EOF {
				return line{}, io.EOF
			}
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				r.info.Lines++
				why := fmt.Sprintf("not CSV at line %d, column %d: %v", pe.Line, pe.Column, pe.Err)
				if errors.Is(err, csv.ErrFieldCount) {
					why = fmt.Sprintf("the line has %d fields, the header %d", len(rec), cr.FieldsPerRecord)
				}
				return line{rec: record{line: int64(pe.StartLine), invalid: why}}, nil
			}
			if err != nil {
				return line{}, fmt.Errorf("%w: read the report: %v", ErrInvalidReport, err)
			}
			r.info.Lines++
			n, _ := cr.FieldPos(0)
			if len(slab) < len(cols) {
				slab = make([]string, 1024*len(cols))
			}
			values := slab[:len(cols):len(cols)]
			slab = slab[len(cols):]
			for i, alts := range cols {
				if alts == nil {
					values[i] = r.p.Tenant
					continue
				}
				for k, c := range alts {
					if v := strings.TrimSpace(rec[c]); v != "" {
						values[i] = r.p.signed(slots[i][k], v)
						break
					}
				}
			}
			if !r.p.keep(values[r.p.whereSlot:]) {
				r.info.Filtered++
				continue
			}
			return r.makeLine(int64(n), values, nil), nil
		}
	}
}

// signed negates v when column is a debit column (Negate).
func (p *plan) signed(column, v string) string {
	if !p.negate[column] {
		return v
	}
	if strings.HasPrefix(v, "-") {
		return v[1:]
	}
	return "-" + strings.TrimPrefix(v, "+")
}

// makeLine checks one line's values (one per slot of the plan): the
// identity, the kind, and that the amount is a number (converted to minor
// units when the plan says the report writes major units). missing names a
// column the line does not have (NDJSON).
func (r *reportReader) makeLine(n int64, values []string, missing []string) line {
	p := r.p
	end := 2 + len(p.fields)
	if p.refSlot >= 0 {
		end++ // the reference travels with the compared values
	}
	rec := record{line: n, tenant: values[0], op: values[1], values: values[2:end]}
	if p.kindSlot >= 0 && p.reversal[strings.ToLower(values[p.kindSlot])] {
		rec.kind = values[p.kindSlot]
	}
	if rec.tenant == "" || rec.op == "" {
		col := p.opCol
		if rec.tenant == "" {
			col = p.tenantCol
		}
		rec.invalid = fmt.Sprintf("no identity: %s is empty or absent", col)
		return line{rec: rec}
	}
	if err := (idem.Identity{TenantID: rec.tenant, OperationID: rec.op}).Validate(); err != nil {
		return line{rec: record{line: n, invalid: err.Error()}}
	}
	switch {
	case len(missing) > 0:
		rec.invalid = "no " + strings.Join(missing, ", ") + " on this line"
	case p.amount >= 0:
		rec.invalid = p.normalizeAmount(&rec)
	}
	return line{rec: rec, hasKey: true}
}

// ndjsonReader returns the function reading the next NDJSON data line: one
// JSON object a line; a column is a member name or a JSON Pointer.
func (r *reportReader) ndjsonReader(br *bufio.Reader) (func() (line, error), error) {
	slots := r.p.slots()
	tokens := make([][][]string, len(slots))
	for i, alts := range slots {
		for _, name := range alts {
			t := []string{name}
			if strings.HasPrefix(name, "/") {
				var err error
				if t, err = parsePointer(name); err != nil {
					return nil, fmt.Errorf("%w: column %v", ErrInvalidMapping, err)
				}
			}
			tokens[i] = append(tokens[i], t)
		}
	}
	var n int64
	var buf []byte
	return func() (line, error) {
		for {
			text, tooLong, err := readLine(br, &buf)
			if ferr := r.body.fatal(); ferr != nil {
				return line{}, ferr
			}
			if err == io.EOF && len(text) == 0 && !tooLong {
				return line{}, io.EOF
			}
			if err != nil && err != io.EOF {
				return line{}, fmt.Errorf("%w: read the report: %v", ErrInvalidReport, err)
			}
			n++
			if n == 1 {
				text = bytes.TrimPrefix(text, []byte("\ufeff"))
			}
			text = bytes.TrimSpace(text)
			if len(text) == 0 && !tooLong {
				continue
			}
			r.info.Lines++
			if tooLong {
				return line{rec: record{line: n, invalid: fmt.Sprintf("the line is longer than %d bytes", MaxLineBytes)}}, nil
			}
			l, keep := r.ndjsonLine(n, text, slots, tokens)
			if !keep {
				r.info.Filtered++
				continue
			}
			return l, nil
		}
	}, nil
}

// ndjsonLine reads the mapped values of one NDJSON line; keep is false
// when the line does not pass the filter.
func (r *reportReader) ndjsonLine(n int64, text []byte, slots [][]string, tokens [][][]string) (line, bool) {
	if text[0] != '{' || !jsontext.Value(text).IsValid() {
		return line{rec: record{line: n, invalid: "not a JSON object"}}, true
	}
	values := make([]string, len(slots))
	var missing []string
	for i, alts := range tokens {
		if alts == nil {
			values[i] = r.p.Tenant
			continue
		}
		found := false
		for k, t := range alts {
			v, err := r.pr.valueAt(text, t)
			if err != nil {
				continue
			}
			found = true
			if v.kind == 'n' {
				continue
			}
			if s := strings.TrimSpace(v.text); s != "" {
				values[i] = r.p.signed(slots[i][k], s)
				break
			}
		}
		if !found && i < 2+len(r.p.fields) {
			missing = append(missing, strings.Join(slots[i], "|"))
		}
	}
	if !r.p.keep(values[r.p.whereSlot:]) {
		return line{}, false
	}
	return r.makeLine(n, values, missing), true
}

// readLine returns the next line without its newline, reading at most
// MaxLineBytes of it into buf; a longer line is skipped to its end and
// reported tooLong.
func readLine(br *bufio.Reader, buf *[]byte) (text []byte, tooLong bool, err error) {
	*buf = (*buf)[:0]
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(*buf)+len(chunk) > MaxLineBytes+1 {
				tooLong, *buf = true, (*buf)[:0]
			} else {
				*buf = append(*buf, chunk...)
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err != nil:
			return *buf, tooLong, err
		}
		return *buf, tooLong, nil
	}
}
