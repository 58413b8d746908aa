package term_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemctl/idemctl/internal/term"
)

func TestEscape(t *testing.T) {
	cases := map[string]string{
		"plain é ✓":                 "plain é ✓",
		"two\nlines\tand a tab":     "two\nlines\tand a tab",
		"\x1b]0;pwned\x07\x1b[2J":   `\x1b]0;pwned\x07\x1b[2J`,
		"over\rwrite":               `over\x0dwrite`,
		"del\x7f c1\u009b":          `del\x7f c1\x9b`,
		"bidi \u202egnp.exe":        `bidi \u202egnp.exe`,
		"bad \xff utf8":             `bad \xff utf8`,
		"reason\u2028line\u2029par": `reason\u2028line\u2029par`,
	}
	for in, want := range cases {
		assert.Equal(t, want, term.Escape(in), "%q", in)
	}
}

func TestWriterAndClean(t *testing.T) {
	var buf bytes.Buffer
	w := term.Writer(&buf, false)
	n, err := w.Write([]byte("tenant \x1b[2J\n"))
	assert.NoError(t, err)
	assert.Equal(t, len("tenant \x1b[2J\n"), n)
	assert.Equal(t, "tenant \\x1b[2J\n", buf.String())
	buf.Reset()
	_, _ = term.Writer(&buf, true).Write([]byte("10%\r20%\x1b"))
	assert.Equal(t, "10%\r20%\\x1b", buf.String())

	type inner struct{ Note string }
	rec := struct {
		Tenant  string
		Payload json.RawMessage
		Items   []inner
		Ptr     *inner
		count   int
	}{Tenant: "a\x1bb", Payload: json.RawMessage(`{"x":"` + "\u009b" + `"}`), Items: []inner{{"\x07"}}, Ptr: &inner{"\u202e"}}
	term.Clean(&rec)
	assert.Equal(t, `a\x1bb`, rec.Tenant)
	assert.Equal(t, `{"x":"\u009b"}`, string(rec.Payload))
	assert.True(t, json.Valid(rec.Payload), "JSON stays JSON")
	assert.Equal(t, `\x07`, rec.Items[0].Note)
	assert.Equal(t, `\u202e`, rec.Ptr.Note)
}
