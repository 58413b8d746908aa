package idem

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrInvalidText is wrapped by CheckText's errors.
var ErrInvalidText = errors.New("invalid text")

// CheckText applies the database's rules for a free-text field an operator
// types (an operator label, a reason, a contract reference; idem.text_problem):
// required, at most max bytes of valid UTF-8, no control character (text
// printed on another operator's terminal must not be able to rewrite it).
// what names the field in the error.
func CheckText(what, value string, max int) error {
	switch {
	case strings.TrimSpace(value) == "":
		return fmt.Errorf("%w: %s is required", ErrInvalidText, what)
	case len(value) > max:
		return fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalidText, what, max)
	case !utf8.ValidString(value):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidText, what)
	}
	if i := strings.IndexFunc(value, func(r rune) bool { return unicode.Is(unicode.Cc, r) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(value[i:])
		return fmt.Errorf("%w: %s contains a control character (U+%04X at byte %d); refused, it would reach a terminal", ErrInvalidText, what, r, i)
	}
	return nil
}
