package recovery

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/idemctl/idemctl/idem"
)

// LineSlack is what a line may hold beyond its payload: identity, class,
// transport (at most idem.MaxTransportBytes) and JSON punctuation.
const LineSlack = 64 << 10

// ErrInvalidLine is wrapped by every error about an unreadable input line.
var ErrInvalidLine = errors.New("invalid input line")

// Request is one ambiguous operation as given by the operator.
type Request struct {
	Tenant      string
	OperationID string
	Class       string
	// Payload is the original payload, any JSON; it is canonicalised and hashed.
	Payload []byte
	// Transport is optional tracing metadata (a JSON object), never identity.
	Transport []byte
	// FirstAttemptAt is when the operation was first attempted, when the
	// input says so (first_attempt_at, RFC 3339): a line absent on the primary
	// whose first attempt predates the primary's promotion is noted.
	FirstAttemptAt time.Time
}

// Item is what a Source yields: a request, or the reason its line is invalid.
type Item struct {
	// Line is the 1-based input line, 0 for a request from the command line.
	Line    int
	Request Request
	// Invalid is set when the line could not be read as a request.
	Invalid error
	// Bytes is how much input the item consumed, for progress.
	Bytes int
}

// Source yields the operations of a run in order; Next returns io.EOF after
// the last one. Any other error is an input failure that ends the run.
type Source interface {
	Next() (Item, error)
}

// Single is a Source of one request.
func Single(r Request) Source { return &single{r: r} }

type single struct {
	r    Request
	done bool
}

// Rewind starts over.
func (s *single) Rewind() error {
	s.done = false
	return nil
}

func (s *single) Next() (Item, error) {
	if s.done {
		return Item{}, io.EOF
	}
	s.done = true
	return Item{Request: s.r}, nil
}

// NDJSON streams requests from r, one JSON object a line:
//
//	{"tenant": "...", "operation_id": "...", "class": "...", "payload": {...}, "transport": {...}}
//
// transport is optional, and so is "note", a string for the person who reads
// the file (intake writes why a line is there); it is never interpreted.
// Blank lines are skipped. A line longer than maxLine
// bytes is reported invalid without being held in memory, and reading goes on
// at the next line.
//
// When r is also an io.Seeker (a file), the source can be read again from its
// start, which Resolver.Run needs (it reads the input once to find the
// identities it holds with two payloads).
func NDJSON(r io.Reader, maxLine int) Source {
	return &ndjson{r: bufio.NewReaderSize(r, 256<<10), src: r, max: maxLine}
}

// rewinder is a Source that can be read again from its start.
type rewinder interface {
	Rewind() error
}

// ErrNotRewindable: Resolver.Run was given an input it cannot read twice.
var ErrNotRewindable = errors.New("the input cannot be read twice (give a file, or a reader that can seek)")

type ndjson struct {
	src  io.Reader
	r    *bufio.Reader
	max  int
	line int
	// pos is the offset of the next line in the input (lineAt reads a line
	// again from there).
	pos    int64
	buf    []byte
	parser lineParser
}

// lineParser reads the envelope of one line; a goroutine that parses lines
// needs its own.
type lineParser struct {
	dec jsontext.Decoder
	rd  bytes.Reader
}

// Rewind starts over at the first line, if the reader can seek.
func (s *ndjson) Rewind() error {
	seeker, ok := s.src.(io.Seeker)
	if !ok {
		return ErrNotRewindable
	}
	if _, err := seeker.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read input again: %w", err)
	}
	s.r.Reset(s.src)
	s.line, s.pos = 0, 0
	return nil
}

func (s *ndjson) Next() (Item, error) {
	for {
		line, n, tooLong, err := s.readLine()
		if err != nil && (err != io.EOF || n == 0) {
			return Item{}, err
		}
		s.line++
		it := Item{Line: s.line, Bytes: n}
		if tooLong {
			it.Invalid = fmt.Errorf("%w: line is longer than %d bytes (the payload limit plus %d KiB); raise --max-bytes if it is expected", ErrInvalidLine, s.max, LineSlack>>10)
			return it, nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		it.Request, it.Invalid = s.parser.parse(line)
		return it, nil
	}
}

// rawLine is a line read but not yet parsed, so that lines can be parsed on
// every core while one goroutine reads: item has Line and Bytes (and
// Invalid for a line too long, then text is nil); text is the line.
type rawLine struct {
	item Item
	text []byte
	// off is where the line starts in the input.
	off int64
}

// nextRaw is Next without the parse: the line's text is appended to buf
// (returned grown) and the rawLine's text is that part of it. Parsing it
// with a lineParser gives what Next would.
func (s *ndjson) nextRaw(buf []byte) (rawLine, []byte, error) {
	for {
		off := s.pos
		line, n, tooLong, err := s.readLine()
		if err != nil && (err != io.EOF || n == 0) {
			return rawLine{}, buf, err
		}
		s.line++
		rl := rawLine{item: Item{Line: s.line, Bytes: n}, off: off}
		if tooLong {
			rl.item.Invalid = fmt.Errorf("%w: line is longer than %d bytes (the payload limit plus %d KiB); raise --max-bytes if it is expected", ErrInvalidLine, s.max, LineSlack>>10)
			return rl, buf, nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		start := len(buf)
		buf = append(buf, line...)
		rl.text = buf[start:len(buf):len(buf)]
		return rl, buf, nil
	}
}

// parsed is the item of a raw line, its request read by p.
func (rl rawLine) parsed(p *lineParser) Item {
	it := rl.item
	if rl.text != nil {
		it.Request, it.Invalid = p.parse(rl.text)
	}
	return it
}

// readLine returns the next line without its newline, and how many bytes it
// consumed. A line over the limit is skipped to its end and reported tooLong.
func (s *ndjson) readLine() (line []byte, n int, tooLong bool, err error) {
	s.buf = s.buf[:0]
	defer func() { s.pos += int64(n) }()
	for {
		chunk, err := s.r.ReadSlice('\n')
		n += len(chunk)
		if !tooLong {
			if len(s.buf)+len(chunk) > s.max+1 { // +1: the newline
				tooLong = true
				s.buf = s.buf[:0]
			} else {
				s.buf = append(s.buf, chunk...)
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF:
			return s.buf, n, tooLong, io.EOF
		case err != nil:
			return nil, n, false, fmt.Errorf("read input: %w", err)
		}
		return s.buf, n, tooLong, nil
	}
}

// lineAt reads again, through ra (the input), the line that starts at off
// (rawLine.off), without moving the stream; its text is in buf, returned
// grown.
func (s *ndjson) lineAt(ra io.ReaderAt, off int64, buf []byte) (line, grown []byte, err error) {
	buf = buf[:0]
	for len(buf) <= s.max+1 {
		start := len(buf)
		buf = slices.Grow(buf, 512)[:start+512]
		n, err := ra.ReadAt(buf[start:], off+int64(start))
		buf = buf[:start+n]
		if i := bytes.IndexByte(buf[start:], '\n'); i >= 0 {
			return bytes.TrimSpace(buf[:start+i]), buf, nil
		}
		if err == io.EOF {
			return bytes.TrimSpace(buf), buf, nil
		}
		if err != nil {
			return nil, buf, fmt.Errorf("read input again: %w", err)
		}
	}
	return nil, buf, fmt.Errorf("read input again: %w (the line at byte %d is past the limit)", errInputChanged, off)
}

// parse reads one line. The envelope is strict (duplicate or unknown members
// are refused) because a typo such as "transpor" must not be silently ignored.
// When the line is refused for anything but its JSON syntax, the rest of the
// envelope is still read so that the answer names its identity; a syntax
// error keeps what was read before it.
func (s *lineParser) parse(line []byte) (Request, error) {
	s.rd.Reset(line)
	// Duplicate names are checked here for the envelope and by the
	// canonicaliser for the payload (which then names the identity).
	s.dec.Reset(&s.rd, jsontext.AllowDuplicateNames(true))
	var req Request
	var refused error
	refuse := func(format string, args ...any) {
		if refused == nil {
			refused = fmt.Errorf("%w: "+format, append([]any{ErrInvalidLine}, args...)...)
		}
	}
	syntax := func(err error) (Request, error) {
		if refused != nil {
			return req, refused
		}
		return req, fmt.Errorf("%w: not JSON: %v", ErrInvalidLine, jsonErr(err))
	}
	tok, err := s.dec.ReadToken()
	if err != nil {
		return syntax(err)
	}
	if tok.Kind() != '{' {
		return req, fmt.Errorf("%w: want a JSON object, got %s", ErrInvalidLine, kindName(tok.Kind()))
	}
	seen := map[string]bool{}
	for s.dec.PeekKind() != '}' {
		name, err := s.dec.ReadToken()
		if err != nil {
			return syntax(err)
		}
		field := name.String()
		known := field == "tenant" || field == "operation_id" || field == "class" || field == "payload" || field == "transport" || field == "note" ||
			field == "first_attempt_at"
		if known && seen[field] {
			// Keep the first value: the answer names that identity.
			refuse("duplicate field %q", field)
			if _, err := s.dec.ReadValue(); err != nil {
				return syntax(err)
			}
			continue
		}
		seen[field] = true
		if (field == "tenant" || field == "operation_id" || field == "class") && s.dec.PeekKind() == '"' {
			str, err := s.dec.ReadToken()
			if err != nil {
				return syntax(err)
			}
			switch field {
			case "tenant":
				req.Tenant = str.String()
			case "operation_id":
				req.OperationID = str.String()
			default:
				req.Class = str.String()
			}
			continue
		}
		val, err := s.dec.ReadValue()
		if err != nil {
			return syntax(err)
		}
		switch field {
		case "tenant", "operation_id", "class":
			refuse("%s must be a string, got %s", field, kindName(val.Kind()))
		case "payload":
			if val.Kind() == 'n' {
				refuse("payload is null; give the original payload")
				continue
			}
			req.Payload = bytes.Clone(val)
		case "first_attempt_at":
			var text string
			if val.Kind() == '"' {
				_ = json.Unmarshal(val, &text)
			}
			t, err := time.Parse(time.RFC3339Nano, text)
			if err != nil {
				refuse("first_attempt_at must be an RFC 3339 time (2026-11-30T08:00:00Z)")
				continue
			}
			req.FirstAttemptAt = t
		case "note":
			if val.Kind() != '"' {
				refuse("note must be a string, got %s", kindName(val.Kind()))
			}
		case "transport":
			switch val.Kind() {
			case 'n':
			case '{':
				req.Transport = bytes.Clone(val)
			default:
				refuse("transport must be an object, got %s", kindName(val.Kind()))
			}
		default:
			refuse("unknown field %q (want tenant, operation_id, class, payload, transport, note, first_attempt_at)", field)
		}
	}
	if _, err := s.dec.ReadToken(); err != nil { // the closing brace
		return syntax(err)
	}
	if _, err := s.dec.ReadToken(); err != io.EOF {
		return req, fmt.Errorf("%w: more than one JSON value on the line", ErrInvalidLine)
	}
	if refused != nil {
		return req, refused
	}
	for _, name := range []string{"tenant", "operation_id", "class", "payload"} {
		if !seen[name] {
			return req, fmt.Errorf("%w: missing field %s", ErrInvalidLine, name)
		}
	}
	return req, nil
}

// jsonErr keeps a parser error to one line without the package prefix.
func jsonErr(err error) string {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		msg := "syntax error"
		if se.Err != nil {
			msg = se.Err.Error()
		}
		if se.Err == io.ErrUnexpectedEOF {
			msg = "the line ends inside a value"
		}
		return msg + " at byte " + strconv.FormatInt(se.ByteOffset, 10)
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return "the line ends inside a value"
	}
	return err.Error()
}

func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "nothing"
}

// Check validates a request as a run would, without a database: identity,
// class name, payload (canonical form within lim) and transport. An error is
// what the run would answer invalid.
func Check(r Request, lim idem.PayloadLimits) error {
	_, err := prepare(r, lim)
	return err
}

// prepare validates a request and hashes its payload through the core.
func prepare(r Request, lim idem.PayloadLimits) (idem.Prepared, error) {
	return idem.Prepare(idem.Command{
		Identity:  idem.Identity{TenantID: r.Tenant, OperationID: r.OperationID},
		Class:     r.Class,
		Payload:   r.Payload,
		Transport: r.Transport,
	}, lim)
}
