package view

import (
	"bytes"
	"encoding/json"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/textinput"

	"github.com/idemctl/idemctl/internal/term"
)

// OrDash is s, or "-" when s is empty.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// NewInput is a one-line text field in the console's style.
func NewInput(c *Context, placeholder string, limit int) textinput.Model {
	ti := textinput.New()
	ti.Prompt = ""
	ti.Placeholder = placeholder
	ti.CharLimit = limit
	ti.Cursor.SetMode(cursor.CursorStatic)
	ti.PlaceholderStyle = c.Styles.Muted
	ti.Cursor.Style = c.Styles.Focused
	return ti
}

// PrettyJSON indents a JSON value for display, keeping every literal as
// stored (a number is never re-encoded); invalid JSON is shown as is.
func PrettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "(none)"
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// Cleaned escapes every string of what a service read (package term) before
// any view shows it: a tenant, a reason or a payload from the database must
// not be able to drive the terminal.
func Cleaned[T any](v T, err error) (T, error) {
	term.Clean(&v)
	return v, err
}
