package reconcile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// parsePointer splits an RFC 6901 JSON Pointer into its reference tokens.
// The whole document ("") cannot be compared with a report column.
func parsePointer(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("%q is not a JSON Pointer (RFC 6901: /amount, /payee/iban)", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, t := range parts {
		if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(t, "~0", ""), "~1", ""), "~") {
			return nil, fmt.Errorf("%q: \"~\" must be escaped as ~0", p)
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// jsonValue is a value found in a JSON document: its text (a string's
// contents unquoted, any other value as its JSON text) and its kind.
type jsonValue struct {
	text string
	kind jsontext.Kind
}

// number reports whether the value is a JSON number.
func (v jsonValue) number() bool { return v.kind == '0' }

// errNotFound: the pointer names nothing in the document.
var errNotFound = errors.New("not found")

// pointerReader finds values in JSON documents; it reuses its decoder.
type pointerReader struct {
	dec jsontext.Decoder
	rd  bytes.Reader
}

// valueAt returns the value the tokens point at in doc, errNotFound when
// nothing is there, or the document's syntax error.
func (pr *pointerReader) valueAt(doc []byte, tokens []string) (jsonValue, error) {
	if len(tokens) == 1 {
		if v, found, ok := topMember(doc, tokens[0]); ok {
			if !found {
				return jsonValue{}, errNotFound
			}
			return v, nil
		}
	}
	pr.rd.Reset(doc)
	pr.dec.Reset(&pr.rd, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(false))
	for _, tok := range tokens {
		if err := pr.descend(tok); err != nil {
			return jsonValue{}, err
		}
	}
	val, err := pr.dec.ReadValue()
	if err != nil {
		return jsonValue{}, err
	}
	if val.Kind() == '"' {
		s, err := jsontext.AppendUnquote(nil, val)
		if err != nil {
			return jsonValue{}, err
		}
		return jsonValue{text: string(s), kind: '"'}, nil
	}
	return jsonValue{text: string(val), kind: val.Kind()}, nil
}

// descend moves the decoder to the member or element tok of the value it is
// at.
func (pr *pointerReader) descend(tok string) error {
	switch pr.dec.PeekKind() {
	case '{':
		if _, err := pr.dec.ReadToken(); err != nil {
			return err
		}
		for pr.dec.PeekKind() != '}' {
			name, err := pr.dec.ReadToken()
			if err != nil {
				return err
			}
			if name.String() == tok {
				return nil
			}
			if err := pr.dec.SkipValue(); err != nil {
				return err
			}
		}
		return errNotFound
	case '[':
		idx, err := strconv.Atoi(tok)
		if err != nil || idx < 0 || (len(tok) > 1 && tok[0] == '0') {
			return errNotFound
		}
		if _, err := pr.dec.ReadToken(); err != nil {
			return err
		}
		for i := 0; pr.dec.PeekKind() != ']'; i++ {
			if i == idx {
				return nil
			}
			if err := pr.dec.SkipValue(); err != nil {
				return err
			}
		}
		return errNotFound
	case 0:
		if _, err := pr.dec.ReadToken(); err != nil && err != io.EOF {
			return err
		}
		return io.ErrUnexpectedEOF
	}
	return errNotFound
}

// topMember is valueAt's fast path for a member of a flat object of plain
// members, the shape of most stored payloads (canonical JSON: no white
// space): names and strings without escapes, control characters or
// non-ASCII bytes, numbers, true, false, null. It gives up (ok false) on
// anything else, an object or array member included, and valueAt then
// decodes the document; where it answers, the answer is valueAt's.
func topMember(doc []byte, name string) (v jsonValue, found, ok bool) {
	if len(doc) < 2 || doc[0] != '{' {
		return jsonValue{}, false, false
	}
	i := 1
	if doc[i] == '}' {
		return jsonValue{}, false, i+1 == len(doc)
	}
	for {
		key, next, ok := plainString(doc, i)
		if !ok || next >= len(doc) || doc[next] != ':' {
			return jsonValue{}, false, false
		}
		i = next + 1
		var text string
		var kind jsontext.Kind
		switch {
		case i >= len(doc):
			return jsonValue{}, false, false
		case doc[i] == '"':
			if text, next, ok = plainString(doc, i); !ok {
				return jsonValue{}, false, false
			}
			kind = '"'
		case doc[i] == '-' || (doc[i] >= '0' && doc[i] <= '9'):
			if next = numberEnd(doc, i); next < 0 {
				return jsonValue{}, false, false
			}
			text, kind = string(doc[i:next]), '0'
		default:
			for _, lit := range [...]string{"true", "false", "null"} {
				if len(doc)-i >= len(lit) && string(doc[i:i+len(lit)]) == lit {
					text, next, kind = lit, i+len(lit), jsontext.Kind(lit[0])
					break
				}
			}
			if kind == 0 {
				return jsonValue{}, false, false
			}
		}
		if key == name {
			return jsonValue{text: text, kind: kind}, true, true
		}
		switch {
		case next < len(doc) && doc[next] == ',':
			i = next + 1
		case next+1 == len(doc) && doc[next] == '}':
			return jsonValue{}, false, true
		default:
			return jsonValue{}, false, false
		}
	}
}

// plainString reads the JSON string at doc[i] when it holds only printable
// ASCII without escapes; next is the index after its closing quote.
func plainString(doc []byte, i int) (s string, next int, ok bool) {
	if i >= len(doc) || doc[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(doc); j++ {
		switch c := doc[j]; {
		case c == '"':
			return string(doc[i+1 : j]), j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return "", 0, false
		}
	}
	return "", 0, false
}

// numberEnd returns the index after the JSON number at doc[i], -1 when it
// is not one (JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?).
func numberEnd(doc []byte, i int) int {
	digits := func(j int) int {
		k := j
		for k < len(doc) && doc[k] >= '0' && doc[k] <= '9' {
			k++
		}
		return k
	}
	if doc[i] == '-' {
		i++
	}
	switch {
	case i < len(doc) && doc[i] == '0':
		i++
	case i < len(doc) && doc[i] >= '1' && doc[i] <= '9':
		i = digits(i)
	default:
		return -1
	}
	if i < len(doc) && doc[i] == '.' {
		if j := digits(i + 1); j > i+1 {
			i = j
		} else {
			return -1
		}
	}
	if i < len(doc) && (doc[i] == 'e' || doc[i] == 'E') {
		i++
		if i < len(doc) && (doc[i] == '+' || doc[i] == '-') {
			i++
		}
		if j := digits(i); j > i {
			i = j
		} else {
			return -1
		}
	}
	return i
}
