package cmdutil

import (
	"strings"
	"time"
)

// OneLine folds a message onto one line: stderr reports are one line each.
func OneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// Deref is the string a nullable column holds, "" for NULL.
func Deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// OrDash shows an empty cell as "-".
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// FormatStamp renders a database time for a table, in UTC.
func FormatStamp(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

// ClipText shortens a value for a table cell; -o json has it whole.
func ClipText(s string, max int) string {
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max-1]) + "…"
}

// MaxAttentionRows bounds the rows needing attention shown on a terminal; the
// JSON output and --report always hold every row.
const MaxAttentionRows = 50

// PromptRecords is how many records an approval prompt lists before it
// says how many more there are and where to see them all.
const PromptRecords = 200
