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
// the columns of the tenant (-1: fixed), the operation and each field.
func (r *reportReader) csvReader(cr *csv.Reader, cols []int) func() (line, error) {
	return func() (line, error) {
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
			why := "not CSV: " + pe.Err.Error()
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
		values := make([]string, len(cols))
		for i, c := range cols {
			if c < 0 {
				values[i] = r.p.Tenant
				continue
			}
			values[i] = strings.TrimSpace(rec[c])
		}
		return r.makeLine(int64(n), values, nil), nil
	}
}

// makeLine checks one line's values (tenant, operation, then each field):
// the identity, and that the amount is a number. missing names a column the
// line does not have (NDJSON).
func (r *reportReader) makeLine(n int64, values []string, missing []string) line {
	rec := record{line: n, tenant: values[0], op: values[1], values: values[2:]}
	if rec.tenant == "" || rec.op == "" {
		col := r.p.opCol
		if rec.tenant == "" {
			col = r.p.tenantCol
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
	case r.p.amount >= 0:
		if v := rec.values[r.p.amount]; !isDecimal(v) {
			rec.invalid = fmt.Sprintf("%s is not a number: %q (amounts are plain decimals: 1250, 12.50)", r.p.fields[r.p.amount].Column, v)
		}
	}
	return line{rec: rec, hasKey: true}
}

// ndjsonReader returns the function reading the next NDJSON data line: one
// JSON object a line; a column is a member name or a JSON Pointer.
func (r *reportReader) ndjsonReader(br *bufio.Reader) (func() (line, error), error) {
	names := append([]string{r.p.tenantCol, r.p.opCol}, fieldColumns(r.p.fields)...)
	tokens := make([][]string, len(names))
	for i, name := range names {
		switch {
		case name == "":
		case strings.HasPrefix(name, "/"):
			t, err := parsePointer(name)
			if err != nil {
				return nil, fmt.Errorf("%w: column %v", ErrInvalidMapping, err)
			}
			tokens[i] = t
		default:
			tokens[i] = []string{name}
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
			return r.ndjsonLine(n, text, names, tokens), nil
		}
	}, nil
}

// ndjsonLine reads the mapped values of one NDJSON line.
func (r *reportReader) ndjsonLine(n int64, text []byte, names []string, tokens [][]string) line {
	if text[0] != '{' || !jsontext.Value(text).IsValid() {
		return line{rec: record{line: n, invalid: "not a JSON object"}}
	}
	values := make([]string, len(names))
	var missing []string
	for i, t := range tokens {
		if t == nil {
			values[i] = r.p.Tenant
			continue
		}
		v, err := r.pr.valueAt(text, t)
		if err != nil {
			missing = append(missing, names[i])
			continue
		}
		values[i] = strings.TrimSpace(v.text)
		if v.kind == 'n' {
			values[i] = ""
		}
	}
	return r.makeLine(n, values, missing)
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
