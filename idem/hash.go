package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Default limits and the hash format.
const (
	// DefaultMaxPayloadBytes is the largest payload Canonicalize accepts
	// when PayloadLimits.MaxBytes is not set.
	DefaultMaxPayloadBytes = 1 << 20 // 1 MiB
	// DefaultMaxDepth is the deepest nesting of arrays and objects
	// Canonicalize accepts when PayloadLimits.MaxDepth is not set.
	DefaultMaxDepth = 64
	// HashPrefix names the hash scheme (RFC 8785 JCS, then SHA-256) so that
	// stored hashes stay interpretable if the scheme ever has to change.
	HashPrefix = "jcs-sha256:"
)

// maxSupportedDepth is the nesting depth beyond which jsontext refuses
// input regardless of options; a larger PayloadLimits.MaxDepth is clamped
// to it so that the refusal is still reported as ErrTooDeep.
const maxSupportedDepth = 10000

// PayloadLimits bound what Canonicalize accepts. Zero (or negative) values
// mean the defaults.
type PayloadLimits struct {
	// MaxBytes is the largest accepted len(raw); DefaultMaxPayloadBytes if unset.
	MaxBytes int
	// MaxDepth is the deepest accepted nesting of arrays and objects, where a
	// scalar at the top level has depth 0 and {} or [] has depth 1;
	// DefaultMaxDepth if unset. Values above 10000 are treated as 10000,
	// the hard limit of the underlying JSON parser.
	MaxDepth int
}

// Sentinel errors. Every error returned by Canonicalize wraps exactly one of
// them, so callers can map failures to responses with errors.Is, while the
// error's own message explains the specific problem in one line.
var (
	// ErrInvalidJSON reports a syntax error, trailing data after the value,
	// or empty input.
	ErrInvalidJSON = errors.New("payload is not valid JSON")
	// ErrDuplicateKey reports an object with two members of the same name
	// (compared after unescaping), whose meaning JSON leaves undefined.
	ErrDuplicateKey = errors.New("payload has a duplicate object member name")
	// ErrInvalidUTF8 reports bytes that are not valid UTF-8.
	ErrInvalidUTF8 = errors.New("payload is not valid UTF-8")
	// ErrLoneSurrogate reports a \uXXXX escape of a UTF-16 surrogate that is
	// not part of a high+low pair, which denotes no Unicode character.
	ErrLoneSurrogate = errors.New("payload has a lone UTF-16 surrogate escape")
	// ErrLossyNumber reports a number whose value canonicalisation would
	// change, because RFC 8785 represents every number as an IEEE 754 double.
	ErrLossyNumber = errors.New("payload has a number that canonicalisation would change")
	// ErrPayloadTooLarge reports input longer than PayloadLimits.MaxBytes.
	ErrPayloadTooLarge = errors.New("payload is too large")
	// ErrTooDeep reports nesting deeper than PayloadLimits.MaxDepth.
	ErrTooDeep = errors.New("payload is nested too deeply")
)

// payloadError carries a specific one-line message while matching exactly one
// sentinel under errors.Is. The jsontext error is deliberately not wrapped so
// callers cannot come to depend on the parser's internals.
type payloadError struct {
	kind error
	msg  string
}

func (e *payloadError) Error() string { return e.msg }
func (e *payloadError) Unwrap() error { return e.kind }

func newPayloadError(kind error, msg string) error {
	return &payloadError{kind: kind, msg: oneLineMessage(msg)}
}

// oneLineMessage guarantees the single-line promise even if some detail (for
// example text taken from the parser) contained a line break.
func oneLineMessage(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		s = strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(s)
	}
	return s
}

// Canonicalize returns the RFC 8785 (JSON Canonicalization Scheme) canonical
// bytes of raw and their hash, HashPrefix followed by the lowercase hex
// SHA-256 of the canonical bytes.
//
// raw must be exactly one JSON value (surrounding whitespace allowed) of
// valid UTF-8, without duplicate member names or lone surrogate escapes,
// within lim. Beyond RFC 8785, Canonicalize refuses any number whose
// canonical form would denote a different decimal value than its literal
// (for example 9007199254740993, which would become 9007199254740992), so two
// different payloads can never silently share a hash. raw is not modified.
func Canonicalize(raw []byte, lim PayloadLimits) (canonical []byte, hash string, err error) {
	maxBytes := lim.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxPayloadBytes
	}
	maxDepth := lim.MaxDepth
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	maxDepth = min(maxDepth, maxSupportedDepth)

	if len(raw) > maxBytes {
		return nil, "", newPayloadError(ErrPayloadTooLarge, "payload: "+strconv.Itoa(len(raw))+
			" bytes exceeds the limit of "+strconv.Itoa(maxBytes)+
			" bytes; send a smaller payload or raise the configured limit (PayloadLimits.MaxBytes)")
	}
	if len(raw) == 0 {
		return nil, "", newPayloadError(ErrInvalidJSON, "payload: empty; send exactly one JSON value")
	}

	// The single-pass canonicaliser handles every valid payload about three
	// times faster than jsontext. It gives up on the first problem without
	// saying why; the jsontext-based reference path then re-examines the
	// input and produces the precise error. Declining is therefore always
	// safe (at worst the reference result is returned, just slower), while
	// accepting must be exact: tests and the fuzzer check that both paths
	// accept the same inputs with byte-identical output.
	canonical, ok := fastCanonicalize(raw, maxDepth)
	if !ok {
		if canonical, err = referenceCanonicalize(raw, maxDepth); err != nil {
			return nil, "", err
		}
	}
	return canonical, HashCanonical(canonical), nil
}

// referenceCanonicalize canonicalises with jsontext, the reference RFC 8785
// implementation, adding the depth limit and the lossy-number check, and
// classifies every failure. It is roughly three times slower than
// fastCanonicalize, as jsontext formats and then re-parses to sort members.
func referenceCanonicalize(raw []byte, maxDepth int) ([]byte, error) {
	// One pass over raw enforces the depth limit before the parser sees the
	// input (so a hostile "[[[[..." is refused after MaxDepth+1 bytes) and
	// checks every number literal. A lossy number is only reported once the
	// parser has accepted the syntax: on invalid input the scanner's idea of
	// what is a number is not trustworthy, and a syntax error is the more
	// fundamental problem to report.
	numErr, err := scanDepthAndNumbers(raw, maxDepth)
	if err != nil {
		return nil, err
	}

	// AppendFormat with these three options is exactly what
	// jsontext.Value.Canonicalize does (see its documentation), but it writes
	// the result into a fresh slice rather than back into its input, which
	// leaves raw untouched without first copying it.
	canonical, err := jsontext.AppendFormat(nil, raw,
		jsontext.CanonicalizeRawInts(true),
		jsontext.CanonicalizeRawFloats(true),
		jsontext.ReorderRawObjects(true),
	)
	if err != nil {
		return nil, classifyParseError(raw, err)
	}
	if numErr != nil {
		return nil, numErr
	}
	return canonical, nil
}

// HashCanonical returns the hash of bytes that are already canonical:
// HashPrefix followed by the lowercase hex SHA-256 of canonical. It does not
// check that canonical really is canonical.
func HashCanonical(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	var buf [len(HashPrefix) + 2*sha256.Size]byte
	copy(buf[:], HashPrefix)
	hex.Encode(buf[len(HashPrefix):], sum[:])
	return string(buf[:])
}

// ValidHash reports whether s has the form produced by HashCanonical:
// HashPrefix followed by exactly 64 lowercase hex digits.
func ValidHash(s string) bool {
	hexPart, ok := strings.CutPrefix(s, HashPrefix)
	if !ok || len(hexPart) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(hexPart); i++ {
		c := hexPart[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// classifyParseError maps a jsontext error to one of the sentinels. Where the
// library offers structure (ErrDuplicateName, ByteOffset, JSONPointer) that
// is used; lone surrogates and invalid UTF-8 are reported by jsontext through
// unexported error values, so they are recognised by looking at the input
// bytes at the reported offset rather than by matching error text.
func classifyParseError(raw []byte, err error) error {
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		// Not expected from in-memory formatting; still never leak a raw error.
		return newPayloadError(ErrInvalidJSON, "payload: invalid JSON: "+err.Error()+"; send exactly one well-formed JSON value")
	}
	off := int(se.ByteOffset)
	at := " at byte " + strconv.Itoa(off)
	if se.Err == jsontext.ErrDuplicateName {
		msg := "payload: duplicate object member name " + quoteTruncated(se.JSONPointer.LastToken())
		if parent := se.JSONPointer.Parent(); parent != "" {
			msg += " in object " + quoteTruncated(string(parent))
		}
		return newPayloadError(ErrDuplicateKey, msg+at+"; each name may appear only once per object (names are compared after unescaping)")
	}
	if off >= 0 && off < len(raw) {
		if isSurrogateEscape(raw[off:]) {
			return newPayloadError(ErrLoneSurrogate, "payload: lone UTF-16 surrogate escape "+
				string(raw[off:off+6])+at+
				"; a \\uD800-\\uDBFF escape must be followed by a \\uDC00-\\uDFFF escape, send a valid character")
		}
		if r, size := utf8.DecodeRune(raw[off:]); r == utf8.RuneError && size <= 1 {
			return newPayloadError(ErrInvalidUTF8, "payload: invalid UTF-8 byte 0x"+
				strconv.FormatUint(uint64(raw[off]), 16)+at+"; send the payload encoded as UTF-8")
		}
	}
	if se.Err == io.ErrUnexpectedEOF || off >= len(raw) {
		return newPayloadError(ErrInvalidJSON, "payload: invalid JSON: input ends unexpectedly"+at+
			"; send exactly one complete JSON value")
	}
	detail := "syntax error"
	if se.Err != nil {
		detail = se.Err.Error()
	}
	return newPayloadError(ErrInvalidJSON, "payload: invalid JSON: "+detail+at+"; send exactly one well-formed JSON value")
}

// quoteTruncated quotes s for an error message, truncating very long values so a
// hostile payload cannot produce a megabyte-long log line.
func quoteTruncated(s string) string {
	const maxLen = 64
	if len(s) > maxLen {
		cut := maxLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "..."
	}
	return strconv.Quote(s)
}

// isSurrogateEscape reports whether b starts with a \uXXXX escape of a UTF-16
// surrogate code unit (U+D800 to U+DFFF).
func isSurrogateEscape(b []byte) bool {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' || (b[2] != 'd' && b[2] != 'D') {
		return false
	}
	c := b[3]
	if !('8' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
		return false
	}
	return isHexDigit(b[4]) && isHexDigit(b[5])
}

func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// scanDepthAndNumbers makes one pass over raw, skipping strings. It returns
// err if the nesting exceeds maxDepth, and numErr for the first number
// literal whose value canonicalisation would change. It never fails on
// malformed JSON; the parser reports that.
func scanDepthAndNumbers(raw []byte, maxDepth int) (numErr, err error) {
	depth := 0
	for i := 0; i < len(raw); {
		switch c := raw[i]; c {
		case '"':
			i = skipString(raw, i+1)
		case '[', '{':
			depth++
			if depth > maxDepth {
				return nil, newPayloadError(ErrTooDeep, "payload: nesting deeper than the limit of "+
					strconv.Itoa(maxDepth)+" at byte "+strconv.Itoa(i)+
					"; flatten the structure or raise the configured limit (PayloadLimits.MaxDepth)")
			}
			i++
		case ']', '}':
			depth--
			i++
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			j := i + 1
			for j < len(raw) && isNumberByte(raw[j]) {
				j++
			}
			if numErr == nil {
				numErr = checkNumberLossless(raw[i:j], i)
			}
			i = j
		default:
			i++
		}
	}
	return numErr, nil
}

// isNumberByte reports whether c can continue a JSON number literal.
func isNumberByte(c byte) bool {
	return '0' <= c && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// skipString returns the index just past the closing quote of the string
// whose contents start at i, or len(raw) if it is unterminated. A quote is
// escaped exactly when an odd number of backslashes precede it, so the
// search can use the vectorised bytes.IndexByte instead of walking every
// byte; each backslash is counted at most once, keeping this linear.
func skipString(raw []byte, i int) int {
	for {
		k := bytes.IndexByte(raw[i:], '"')
		if k < 0 {
			return len(raw)
		}
		q := i + k
		n := 0
		for p := q - 1; p >= i && raw[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

// jcsDecimal is the exact value of a JSON number literal in a normal form in
// which equal values look the same whatever their spelling: the value is
// ±d₁.d₂…dₙ × 10^exp with d₁ ≠ 0 and dₙ ≠ 0, or n == 0 for zero of either
// sign. The digits are not copied; they are read in place from the literal's
// integer and fraction parts, skipping lead leading zeros.
type jcsDecimal struct {
	neg      bool
	intPart  []byte // digits before '.'
	fracPart []byte // digits after '.'
	lead     int    // leading zeros of intPart+fracPart to skip
	n        int    // number of significant digits
	exp      int64  // decimal exponent of the first significant digit
}

// digitAt returns digit i of intPart+fracPart.
func (d *jcsDecimal) digitAt(i int) byte {
	if i < len(d.intPart) {
		return d.intPart[i]
	}
	return d.fracPart[i-len(d.intPart)]
}

// equal reports whether d and e denote the same number. Zero equals zero
// whatever the sign, as -0 and 0 are the same value (and RFC 8785 writes both
// as 0).
func (d *jcsDecimal) equal(e *jcsDecimal) bool {
	if d.n != e.n {
		return false
	}
	if d.n == 0 {
		return true
	}
	if d.neg != e.neg || d.exp != e.exp {
		return false
	}
	for k := 0; k < d.n; k++ {
		if d.digitAt(d.lead+k) != e.digitAt(e.lead+k) {
			return false
		}
	}
	return true
}

// maxParsedExponent caps the magnitude of a parsed exponent. Anything beyond
// it is far outside the float64 range, so the precise value does not matter,
// and the cap keeps the arithmetic below from overflowing.
const maxParsedExponent = 1 << 40

// parseNumberLiteral parses a literal following the JSON number grammar
// (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?) without allocating.
// ok is false if lit does not follow that grammar; the parser rejects such
// input anyway.
func parseNumberLiteral(lit []byte) (d jcsDecimal, ok bool) {
	i := 0
	if i < len(lit) && lit[i] == '-' {
		d.neg = true
		i++
	}
	start := i
	for i < len(lit) && '0' <= lit[i] && lit[i] <= '9' {
		i++
	}
	if i == start || (lit[start] == '0' && i-start > 1) {
		return d, false
	}
	d.intPart = lit[start:i]
	if i < len(lit) && lit[i] == '.' {
		i++
		start = i
		for i < len(lit) && '0' <= lit[i] && lit[i] <= '9' {
			i++
		}
		if i == start {
			return d, false
		}
		d.fracPart = lit[start:i]
	}
	var exp int64
	if i < len(lit) && (lit[i] == 'e' || lit[i] == 'E') {
		i++
		expNeg := false
		if i < len(lit) && (lit[i] == '+' || lit[i] == '-') {
			expNeg = lit[i] == '-'
			i++
		}
		start = i
		for i < len(lit) && '0' <= lit[i] && lit[i] <= '9' {
			if exp < maxParsedExponent {
				exp = exp*10 + int64(lit[i]-'0')
			}
			i++
		}
		if i == start {
			return d, false
		}
		if expNeg {
			exp = -exp
		}
	}
	if i != len(lit) {
		return d, false
	}

	// Strip leading and trailing zeros of the digit string intPart+fracPart.
	total := len(d.intPart) + len(d.fracPart)
	for d.lead < total && d.digitAt(d.lead) == '0' {
		d.lead++
	}
	end := total
	for end > d.lead && d.digitAt(end-1) == '0' {
		end--
	}
	d.n = end - d.lead
	// The literal is D × 10^(exp − len(fracPart)) for the integer D formed by
	// all its digits; D's first significant digit sits at 10^(total−lead−1).
	d.exp = exp - int64(len(d.fracPart)) + int64(total-d.lead-1)
	return d, true
}

// checkNumberLossless returns ErrLossyNumber if the RFC 8785 form of lit (the
// shortest text that reads back as the same float64, per ECMAScript) denotes
// a different decimal value than lit itself. off is lit's byte offset in the
// payload, for the message.
//
// The rule compares texts, not binary floats: 0.1 is accepted although no
// float64 equals 0.1 exactly, because its canonical text is again 0.1, and
// likewise 5e-324. What matters for an idempotency hash is that the canonical
// bytes, which are what is hashed, mean exactly what the client sent.
func checkNumberLossless(lit []byte, off int) error {
	d, ok := parseNumberLiteral(lit)
	if !ok {
		return nil // malformed; the parser reports it
	}
	// Typical integers, amounts and ratios need no float arithmetic.
	if d.exact() {
		return nil
	}
	// Slow path: format the float like the canonicaliser and compare exactly.
	// The shortest form never needs more than 17 digits, so a literal with
	// more significant digits is always lossy; the parse is still done for the
	// message.
	f, _ := strconv.ParseFloat(string(lit), 64) // grammar checked above; ±Inf on overflow
	if math.IsInf(f, 0) {
		// jsontext clamps overflowing literals to the largest finite float.
		f = math.Copysign(math.MaxFloat64, f)
	}
	var buf [32]byte
	canon := jsontext.AppendFloat(buf[:0], f, 64)
	if d.n <= 17 {
		if c, ok := parseNumberLiteral(canon); ok && c.equal(&d) {
			return nil
		}
	}
	if f == 0 {
		canon = append(canon[:0], '0') // RFC 8785 writes -0 as 0
	}
	return newPayloadError(ErrLossyNumber, "payload: number "+truncLiteral(lit)+" at byte "+strconv.Itoa(off)+
		" would change value when canonicalised (becomes "+string(canon)+
		"); send it as a string or in minor units")
}

// truncLiteral shortens absurdly long number literals in messages.
func truncLiteral(lit []byte) string {
	const maxLen = 40
	if len(lit) > maxLen {
		return string(lit[:maxLen]) + "..."
	}
	return string(lit)
}

// fastCanonicalize is a single-pass RFC 8785 canonicaliser: it validates raw
// and writes the canonical form as it goes, sorting each object's members in
// place once the object is complete. It reports ok == false, without
// detail, for anything it does not accept: syntax errors, invalid UTF-8,
// lone surrogates, duplicate names, lossy numbers and nesting deeper than
// maxDepth.
func fastCanonicalize(raw []byte, maxDepth int) (canonical []byte, ok bool) {
	c := canonStatePool.Get().(*canonState)
	c.in = raw
	c.out = make([]byte, 0, len(raw))
	c.maxDepth = maxDepth
	c.members = c.members[:0]
	c.names = c.names[:0]

	i, ok := c.value(skipJSONSpace(raw, 0), 0)
	if ok {
		ok = skipJSONSpace(raw, i) == len(raw)
	}
	if ok {
		canonical = c.out
	}

	// Drop references to caller memory and oversized scratch before pooling.
	c.in, c.out = nil, nil
	if cap(c.tmp) > 64<<10 {
		c.tmp = nil
	}
	if cap(c.names) > 64<<10 {
		c.names = nil
	}
	if cap(c.members) > 4096 {
		c.members = nil
	}
	canonStatePool.Put(c)
	return canonical, ok
}

// canonState is the scratch state of one fastCanonicalize call; it is pooled
// so that a call costs one allocation for the output and nothing else.
type canonState struct {
	in       []byte
	out      []byte
	maxDepth int
	// members is a stack of the members of all objects being parsed; an
	// object owns the entries above the length it found on entry.
	members []jcsMember
	names   []byte // unescaped names that contained escapes
	tmp     []byte // scratch for reordering members
}

// jcsMember locates one object member. Positions rather than slices are stored
// so that the scratch holds no pointers into caller memory while pooled.
type jcsMember struct {
	nameOff, nameEnd int  // the unescaped name, in names if escaped else in in
	escaped          bool // the name is in names
	start, end       int  // the canonical `"name":value` in out
}

var canonStatePool = sync.Pool{New: func() any { return new(canonState) }}

func (c *canonState) name(m *jcsMember) []byte {
	if m.escaped {
		return c.names[m.nameOff:m.nameEnd]
	}
	return c.in[m.nameOff:m.nameEnd]
}

// skipJSONSpace returns the index of the first non-whitespace byte at or after i.
func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// value canonicalises the value starting at in[i] (no leading whitespace)
// and returns the index just past it. depth is the nesting depth of the
// value's container.
func (c *canonState) value(i, depth int) (int, bool) {
	if i >= len(c.in) {
		return i, false
	}
	switch b := c.in[i]; b {
	case '{':
		return c.object(i, depth+1)
	case '[':
		return c.array(i, depth+1)
	case '"':
		end, _, ok := c.string(i)
		return end, ok
	case 't':
		return c.literal(i, "true")
	case 'f':
		return c.literal(i, "false")
	case 'n':
		return c.literal(i, "null")
	default:
		if b == '-' || '0' <= b && b <= '9' {
			return c.number(i)
		}
		return i, false
	}
}

func (c *canonState) literal(i int, lit string) (int, bool) {
	if !bytes.HasPrefix(c.in[i:], []byte(lit)) {
		return i, false
	}
	c.out = append(c.out, lit...)
	return i + len(lit), true
}

func (c *canonState) array(i, depth int) (int, bool) {
	if depth > c.maxDepth {
		return i, false
	}
	c.out = append(c.out, '[')
	i = skipJSONSpace(c.in, i+1)
	if i < len(c.in) && c.in[i] == ']' {
		c.out = append(c.out, ']')
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = c.value(i, depth); !ok {
			return i, false
		}
		i = skipJSONSpace(c.in, i)
		if i >= len(c.in) {
			return i, false
		}
		switch c.in[i] {
		case ',':
			c.out = append(c.out, ',')
			i = skipJSONSpace(c.in, i+1)
		case ']':
			c.out = append(c.out, ']')
			return i + 1, true
		default:
			return i, false
		}
	}
}

func (c *canonState) object(i, depth int) (int, bool) {
	if depth > c.maxDepth {
		return i, false
	}
	open := len(c.out)
	c.out = append(c.out, '{')
	i = skipJSONSpace(c.in, i+1)
	if i < len(c.in) && c.in[i] == '}' {
		c.out = append(c.out, '}')
		return i + 1, true
	}
	base := len(c.members)
	for {
		if i >= len(c.in) || c.in[i] != '"' {
			return i, false
		}
		m := jcsMember{start: len(c.out), nameOff: i + 1}
		end, escaped, ok := c.string(i)
		if !ok {
			return end, false
		}
		m.nameEnd = end - 1
		if escaped {
			// Sorting and duplicate detection compare unescaped names.
			// Unescape the canonical form just written rather than the raw
			// text: its only escapes are those of '"', '\' and control
			// characters, which keeps this trivial.
			m.escaped = true
			m.nameOff = len(c.names)
			c.names = appendUnescapeCanonical(c.names, c.out[m.start+1:len(c.out)-1])
			m.nameEnd = len(c.names)
		}
		i = skipJSONSpace(c.in, end)
		if i >= len(c.in) || c.in[i] != ':' {
			return i, false
		}
		c.out = append(c.out, ':')
		if i, ok = c.value(skipJSONSpace(c.in, i+1), depth); !ok {
			return i, false
		}
		m.end = len(c.out)
		c.members = append(c.members, m)

		i = skipJSONSpace(c.in, i)
		if i >= len(c.in) {
			return i, false
		}
		if c.in[i] == ',' {
			c.out = append(c.out, ',')
			i = skipJSONSpace(c.in, i+1)
			continue
		}
		if c.in[i] != '}' {
			return i, false
		}
		i++
		break
	}
	c.out = append(c.out, '}')
	ok := c.sortMembers(open, c.members[base:])
	c.members = c.members[:base]
	return i, ok
}

// sortMembers puts the members of the object whose '{' is at out[open] into
// RFC 8785 order (by the UTF-16 code units of their names). It reports false
// if two members have the same name.
func (c *canonState) sortMembers(open int, ms []jcsMember) bool {
	// Clients often send members already sorted; one linear check then
	// settles both order and uniqueness.
	sorted := true
	for k := 1; k < len(ms); k++ {
		cmp := compareUTF16(c.name(&ms[k-1]), c.name(&ms[k]))
		if cmp == 0 {
			return false
		}
		if cmp > 0 {
			sorted = false
			break
		}
	}
	if sorted {
		return true
	}
	if len(ms) <= 16 {
		// Insertion sort: objects are usually small, and this avoids the
		// indirect comparison calls of the generic sort.
		for k := 1; k < len(ms); k++ {
			m := ms[k]
			name := c.name(&m)
			j := k
			for ; j > 0 && compareUTF16(c.name(&ms[j-1]), name) > 0; j-- {
				ms[j] = ms[j-1]
			}
			ms[j] = m
		}
	} else {
		slices.SortFunc(ms, func(a, b jcsMember) int {
			return compareUTF16(c.name(&a), c.name(&b))
		})
	}
	for k := 1; k < len(ms); k++ {
		if bytes.Equal(c.name(&ms[k-1]), c.name(&ms[k])) {
			return false
		}
	}
	// Rebuild the member list in order, then copy it over the original: the
	// members together with their separating commas have the same length in
	// either order.
	c.tmp = c.tmp[:0]
	for k := range ms {
		if k > 0 {
			c.tmp = append(c.tmp, ',')
		}
		c.tmp = append(c.tmp, c.out[ms[k].start:ms[k].end]...)
	}
	copy(c.out[open+1:], c.tmp)
	return true
}

// compareUTF16 compares two valid UTF-8 strings by their UTF-16 code units,
// as RFC 8785 section 3.2.3 requires. UTF-8 byte order equals code point
// order, which differs from UTF-16 order only between U+E000..U+FFFF and the
// supplementary planes (encoded in UTF-16 as surrogates, D800..DFFF), so only
// that case needs decoding.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	if a[i] < utf8.RuneSelf || b[i] < utf8.RuneSelf {
		return int(a[i]) - int(b[i])
	}
	// Both differ inside a multi-byte rune, which starts at the same place
	// in both since the bytes before i are equal.
	j := i
	for j > 0 && !utf8.RuneStart(a[j]) {
		j--
	}
	ra, _ := utf8.DecodeRune(a[j:])
	rb, _ := utf8.DecodeRune(b[j:])
	aSupp, bSupp := ra >= 0x10000, rb >= 0x10000
	if aSupp != bSupp && (ra >= 0xE000 && rb >= 0xE000) {
		// One is U+E000..U+FFFF, the other supplementary: the surrogate
		// code unit of the supplementary one sorts first.
		if aSupp {
			return -1
		}
		return 1
	}
	return int(ra) - int(rb)
}

// appendUnescapeCanonical appends the unescaped content of a string in
// canonical form (without quotes), in which the only escapes are \", \\,
// \b, \f, \n, \r, \t and \u00XX.
func appendUnescapeCanonical(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			dst = append(dst, s[i])
			continue
		}
		i++
		switch s[i] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			dst = append(dst, hexDigitValue(s[i+3])<<4|hexDigitValue(s[i+4]))
			i += 4
		default: // '"' or '\\'
			dst = append(dst, s[i])
		}
	}
	return dst
}

// jsonPlainASCII marks the bytes a string may contain verbatim, in both input
// and canonical output: printable ASCII except '"' and '\'.
var jsonPlainASCII = func() (t [256]bool) {
	for b := 0x20; b < 0x80; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// string canonicalises the string starting at in[i] == '"' and returns the
// index just past its closing quote and whether it contained escapes.
// Canonical strings escape only '"', '\' and control characters (with the
// short forms where JSON has them); everything else is written as UTF-8.
func (c *canonState) string(i int) (end int, escaped, ok bool) {
	in := c.in
	c.out = append(c.out, '"')
	i++
	seg := i // start of the pending verbatim run
	for i < len(in) {
		for i < len(in) && jsonPlainASCII[in[i]] {
			i++
		}
		if i >= len(in) {
			break
		}
		switch b := in[i]; {
		case b == '"':
			c.out = append(c.out, in[seg:i]...)
			c.out = append(c.out, '"')
			return i + 1, escaped, true
		case b == '\\':
			c.out = append(c.out, in[seg:i]...)
			escaped = true
			if i, ok = c.escape(i); !ok {
				return i, escaped, false
			}
			seg = i
		case b < 0x20:
			return i, escaped, false // control characters must be escaped
		default:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size <= 1 {
				return i, escaped, false // invalid UTF-8, incl. encoded surrogates
			}
			i += size
		}
	}
	return i, escaped, false // unterminated
}

// escape decodes the escape sequence at in[i] == '\' and appends the
// canonical form of the character it denotes.
func (c *canonState) escape(i int) (int, bool) {
	in := c.in
	if i+1 >= len(in) {
		return i, false
	}
	var r rune
	switch in[i+1] {
	case '"', '\\', '/':
		r = rune(in[i+1])
	case 'b':
		r = '\b'
	case 'f':
		r = '\f'
	case 'n':
		r = '\n'
	case 'r':
		r = '\r'
	case 't':
		r = '\t'
	case 'u':
		hi, ok := parseHex4(in[i+2:])
		if !ok {
			return i, false
		}
		r = rune(hi)
		if utf16.IsSurrogate(r) {
			// Only a high surrogate followed by an escaped low one is a
			// character; anything else is a lone surrogate.
			lo, ok := parseHex4(in[min(i+8, len(in)):])
			if !ok || hi >= 0xDC00 || in[i+6] != '\\' || in[i+7] != 'u' || lo < 0xDC00 || lo > 0xDFFF {
				return i, false
			}
			r = utf16.DecodeRune(rune(hi), rune(lo))
			i += 6
		}
		i += 6
		c.out = appendCanonicalRune(c.out, r)
		return i, true
	default:
		return i, false
	}
	c.out = appendCanonicalRune(c.out, r)
	return i + 2, true
}

// parseHex4 decodes four hex digits at the start of b.
func parseHex4(b []byte) (uint16, bool) {
	if len(b) < 4 || !isHexDigit(b[0]) || !isHexDigit(b[1]) || !isHexDigit(b[2]) || !isHexDigit(b[3]) {
		return 0, false
	}
	return uint16(hexDigitValue(b[0]))<<12 | uint16(hexDigitValue(b[1]))<<8 | uint16(hexDigitValue(b[2]))<<4 | uint16(hexDigitValue(b[3])), true
}

// hexDigitValue returns the value of the hex digit b, which must be valid.
func hexDigitValue(b byte) byte {
	switch {
	case b <= '9':
		return b - '0'
	case b >= 'a':
		return b - 'a' + 10
	default:
		return b - 'A' + 10
	}
}

// appendCanonicalRune appends r as RFC 8785 section 3.2.2.2 writes it.
func appendCanonicalRune(dst []byte, r rune) []byte {
	switch r {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 {
		const hexDigits = "0123456789abcdef"
		return append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
	}
	return utf8.AppendRune(dst, r)
}

// number canonicalises the number literal starting at in[i].
func (c *canonState) number(i int) (int, bool) {
	j := i + 1
	for j < len(c.in) && isNumberByte(c.in[j]) {
		j++
	}
	lit := c.in[i:j]
	d, ok := parseNumberLiteral(lit)
	if !ok {
		return i, false
	}
	if d.exact() {
		c.out = d.appendES6(c.out)
		return j, true
	}
	// Let the library format the float, then insist that the text it
	// produced denotes the literal's value; otherwise the number is lossy.
	// No float64 needs more than 17 digits, so longer literals are lossy.
	if d.n > 17 {
		return i, false
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return i, false // overflow
	}
	mark := len(c.out)
	c.out = jsontext.AppendFloat(c.out, f, 64)
	if canon, ok := parseNumberLiteral(c.out[mark:]); !ok || !canon.equal(&d) {
		return i, false
	}
	return j, true
}

// exact reports whether d's own digits are its canonical digits: a decimal of
// at most 15 significant digits in the normal float64 range survives the
// round trip to float64 and back (15 is DBL_DIG), so no other decimal of
// ≤ 15 digits maps to the same float, and the shortest round-tripping digits,
// which RFC 8785 (via ECMAScript) prescribes, are exactly d's.
// Zero, of either sign, is always exact.
func (d *jcsDecimal) exact() bool {
	// Zero is exact whatever its exponent; the range check must not send
	// -0e700 down the float path, which would keep its sign.
	return d.n == 0 || d.n <= 15 && d.exp >= -307 && d.exp <= 307
}

// appendES6 appends d formatted by ECMAScript's Number::toString (ECMA-262
// section 6.1.6.1.20, which RFC 8785 section 3.2.2.3 adopts), given that d's
// digits are the shortest round-tripping ones (see exact). Zero is written
// as 0 whatever its sign.
func (d *jcsDecimal) appendES6(dst []byte) []byte {
	if d.n == 0 {
		return append(dst, '0')
	}
	if d.neg {
		dst = append(dst, '-')
	}
	k := int64(d.n)
	n := d.exp + 1 // ECMAScript's n: the value is 0.d₁…d_k × 10ⁿ
	digits := func(dst []byte, from, to int64) []byte {
		for x := from; x < to; x++ {
			dst = append(dst, d.digitAt(d.lead+int(x)))
		}
		return dst
	}
	switch {
	case k <= n && n <= 21:
		dst = digits(dst, 0, k)
		for x := k; x < n; x++ {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = digits(dst, 0, n)
		dst = append(dst, '.')
		dst = digits(dst, n, k)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for x := n; x < 0; x++ {
			dst = append(dst, '0')
		}
		dst = digits(dst, 0, k)
	default:
		dst = digits(dst, 0, 1)
		if k > 1 {
			dst = append(dst, '.')
			dst = digits(dst, 1, k)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, n-1, 10)
	}
	return dst
}
