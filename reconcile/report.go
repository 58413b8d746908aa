package reconcile

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ErrInvalidReport: the report as a whole cannot be read (empty, truncated,
// corrupt, no header, a mapped column missing). Nothing was written.
var ErrInvalidReport = errors.New("invalid report")

// MaxLineBytes is the longest report line read; a longer one is invalid.
const MaxLineBytes = 1 << 20

// ReportInfo describes the report a run read.
type ReportInfo struct {
	// Name is the report's file name (no directory), "stdin" for "-".
	Name string `json:"name"`
	// SHA256 is the hex SHA-256 of the report's bytes as given (compressed
	// when it is gzipped).
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
	Gzip   bool   `json:"gzip"`
	Format Format `json:"format"`
	// Lines is how many data lines were read (not the header, not blanks).
	Lines int64 `json:"lines"`
	// Filtered is how many of them the row filter (--where) left out.
	Filtered int64 `json:"filtered,omitempty"`
}

// line is one data line read from a report: a record when its identity
// could be read, else only its number and why it is invalid.
type line struct {
	rec    record
	hasKey bool
}

// reportReader streams a report's data lines, hashing every byte it reads.
type reportReader struct {
	p      *plan
	info   ReportInfo
	raw    *hashingReader
	closer io.Closer
	body   *trackingReader
	next   func() (line, error)
	pr     pointerReader
}

// openReport opens the report of the plan (in when it is "-"), checks its
// header and returns a reader positioned at the first data line.
func openReport(p *plan, in io.Reader) (*reportReader, error) {
	r := &reportReader{p: p, info: ReportInfo{Name: "stdin"}}
	src := in
	if p.Report != "-" {
		f, err := os.Open(p.Report)
		if err != nil {
			// A file that cannot be opened is an I/O error, as for every
			// command; ErrInvalidReport is a report that is not one.
			return nil, fmt.Errorf("open the report: %w", err)
		}
		r.closer, src, r.info.Name = f, f, filepath.Base(p.Report)
	}
	r.raw = &hashingReader{r: src, h: sha256.New()}
	br := bufio.NewReaderSize(r.raw, 256<<10)
	magic, err := br.Peek(2)
	if len(magic) == 0 {
		r.close()
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalidReport, r.info.Name, err)
		}
		return nil, fmt.Errorf("%w: %s is empty (0 bytes)", ErrInvalidReport, r.info.Name)
	}
	var body io.Reader = br
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("%w: %s: not a readable gzip file: %v", ErrInvalidReport, r.info.Name, err)
		}
		r.info.Gzip, body = true, gz
	}
	r.body = &trackingReader{r: body}
	if err := r.start(bufio.NewReaderSize(r.body, 256<<10)); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// start picks the format and reads the CSV header.
func (r *reportReader) start(br *bufio.Reader) error {
	format := r.p.Format
	if format == FormatAuto {
		format = FormatCSV
		if b, err := peekNonSpace(br); err == nil && b == '{' {
			format = FormatNDJSON
		} else if err == io.EOF {
			return r.emptyOr()
		}
	}
	r.info.Format = format
	if format == FormatNDJSON {
		var err error
		r.next, err = r.ndjsonReader(br)
		return err
	}
	return r.startCSV(br)
}

// emptyOr says why a report holds no line: a read error, or nothing at all.
func (r *reportReader) emptyOr() error {
	if err := r.body.fatal(); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s is empty (no line)", ErrInvalidReport, r.info.Name)
}

// peekNonSpace returns the first byte after a UTF-8 BOM and white space.
func peekNonSpace(br *bufio.Reader) (byte, error) {
	for i := 1; ; i++ {
		b, err := br.Peek(i)
		if len(b) < i {
			return 0, err
		}
		c := b[i-1]
		if c == ' ' || c == '\t' || c == '\r' || c == '\n' || (i <= 3 && (c == 0xEF || c == 0xBB || c == 0xBF)) {
			if i == br.Size() {
				return 0, io.EOF
			}
			continue
		}
		return c, nil
	}
}

// close releases the file.
func (r *reportReader) close() {
	if r.closer != nil {
		r.closer.Close()
		r.closer = nil
	}
}

// finish reads what is left of the file (for the hash) and returns the
// report's description.
func (r *reportReader) finish() (ReportInfo, error) {
	if _, err := io.Copy(io.Discard, r.raw); err != nil {
		return ReportInfo{}, fmt.Errorf("%w: %s: %v", ErrInvalidReport, r.info.Name, err)
	}
	r.info.SHA256 = hex.EncodeToString(r.raw.h.Sum(nil))
	r.info.Bytes = r.raw.n
	r.close()
	return r.info, nil
}

// hashingReader hashes and counts what it reads.
type hashingReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (h *hashingReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

// trackingReader remembers the first read error that is not the end: a
// truncated or corrupt gzip stream, a failing disk. The CSV reader would
// otherwise report it as a line's problem.
type trackingReader struct {
	r   io.Reader
	err error
}

func (t *trackingReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF && t.err == nil {
		t.err = err
	}
	return n, err
}

// fatal is the read error, as an invalid report.
func (t *trackingReader) fatal() error {
	switch {
	case t.err == nil:
		return nil
	case errors.Is(t.err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: the report is truncated: its gzip stream ends early", ErrInvalidReport)
	case errors.Is(t.err, gzip.ErrChecksum), errors.Is(t.err, gzip.ErrHeader):
		return fmt.Errorf("%w: the report's gzip stream is corrupt: %v", ErrInvalidReport, t.err)
	}
	return fmt.Errorf("%w: read the report: %v", ErrInvalidReport, t.err)
}

// startCSV reads the header and finds the mapped columns.
func (r *reportReader) startCSV(br *bufio.Reader) error {
	cr := csv.NewReader(br)
	cr.Comma = r.p.delimiter
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		if ferr := r.body.fatal(); ferr != nil {
			return ferr
		}
		if err == io.EOF {
			return fmt.Errorf("%w: %s is empty (no header line)", ErrInvalidReport, r.info.Name)
		}
		return fmt.Errorf("%w: %s: the header line is not CSV: %v", ErrInvalidReport, r.info.Name, err)
	}
	index := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if _, dup := index[h]; !dup {
			index[h] = i
		}
	}
	cols, err := r.csvColumns(index, header)
	if err != nil {
		return err
	}
	cr.FieldsPerRecord = len(header)
	r.next = r.csvReader(cr, cols)
	return nil
}

// csvColumns returns, for each slot of the plan, the indexes of its
// alternative columns (nil for a fixed tenant).
func (r *reportReader) csvColumns(index map[string]int, header []string) ([][]int, error) {
	slots := r.p.slots()
	cols := make([][]int, len(slots))
	for i, alts := range slots {
		for _, name := range alts {
			c, ok := index[name]
			if !ok && i == r.p.refSlot {
				cols[i] = []int{} // optional: no reference on any line
				continue
			}
			if !ok {
				return nil, fmt.Errorf("%w: %s has no column %q (mapped by %s%s); its columns are: %s",
					ErrInvalidReport, r.info.Name, name, r.slotFlag(i), name, strings.Join(header, ", "))
			}
			cols[i] = append(cols[i], c)
		}
	}
	return cols, nil
}

// slotFlag names what maps slot i, for an error.
func (r *reportReader) slotFlag(i int) string {
	p := r.p
	switch {
	case i == 0:
		return "--key tenant="
	case i == 1:
		return "--key operation_id="
	case i < 2+len(p.fields):
		return "--compare " + p.fields[i-2].Pointer + "="
	case i == p.refSlot:
		return "reference_column "
	case i == p.kindSlot:
		return "the profile's kind_column "
	}
	return "--where "
}
