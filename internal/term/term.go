// Package term keeps text from the database or from input from taking over
// the operator's terminal: control characters (C0 but newline and tab, DEL,
// C1), the Unicode bidirectional controls and the line and paragraph
// separators (U+2028, U+2029) are shown escaped (\x1b, \u202e)
// instead of being sent raw, so a tenant of "\x1b[2J" or an operation id that
// sets the window title prints as what it is.
package term

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"
)

// unsafe reports whether r must not reach a terminal raw. keepCR lets a
// carriage return through (progress lines on stderr redraw with it).
func unsafe(r rune, keepCR bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r == '\r':
		return !keepCR
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	case r == 0x2028, r == 0x2029: // line and paragraph separators: a line break to some terminals
		return true
	}
	return false
}

// Escape returns s with every unsafe character written as an escape, and
// invalid UTF-8 bytes as \xNN.
func Escape(s string) string { return escape(s, false) }

func escape(s string, keepCR bool) string { return escapeAs(s, keepCR, `\x%02x`) }

// escapeAs writes unsafe characters below U+0100 with byteFormat (\x%02x for
// text, \u%04x inside JSON, where it is a valid escape).
func escapeAs(s string, keepCR bool, byteFormat string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || unsafe(r, keepCR) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for len(s[i:]) > 0 {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
			n = 1
		case r < 0x100 && unsafe(r, keepCR):
			fmt.Fprintf(&b, byteFormat, r)
		case unsafe(r, keepCR):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// EscapeJSON returns JSON text with every unsafe character written as a JSON
// escape (\u009b): still the same JSON, safe on a terminal. Only strings can
// hold such characters in valid JSON.
func EscapeJSON(b []byte) []byte {
	s := string(b)
	if e := escapeAs(s, false, `\u%04x`); e != s {
		return []byte(e)
	}
	return b
}

// Writer returns a writer that escapes what it passes on to w. keepCR lets
// carriage returns through (for a progress line on stderr).
func Writer(w io.Writer, keepCR bool) io.Writer { return &writer{w: w, keepCR: keepCR} }

type writer struct {
	w      io.Writer
	keepCR bool
}

// Write escapes p and writes it whole; it reports len(p) on success.
func (e *writer) Write(p []byte) (int, error) {
	out := escape(string(p), e.keepCR)
	if _, err := io.WriteString(e.w, out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Clean escapes, in place, every string (and every []byte, json.RawMessage
// included, whose escapes are JSON's \u00XX so that it still parses) reachable
// from v, a pointer: a record read from the database before a terminal
// interface shows any of it.
func Clean(v any) {
	clean(reflect.ValueOf(v))
}

func clean(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			clean(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				clean(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.CanSet() && !v.IsNil() {
				v.SetBytes(EscapeJSON(v.Bytes()))
			}
			return
		}
		for i := 0; i < v.Len(); i++ {
			clean(v.Index(i))
		}
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			clean(v.Index(i))
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(Escape(v.String()))
		}
	}
}
