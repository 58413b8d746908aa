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
