package cmdutil

import (
	"bytes"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func maxLineWidth(s string) int {
	w := 0
	for _, l := range strings.Split(s, "\n") {
		w = max(w, ansi.StringWidth(l))
	}
	return w
}

// A table wider than the terminal fits it: identifiers stay whole, the
// explanatory column wraps (nothing of it is lost), and the columns that do
// not fit are hidden in their declared order and named.
func TestTableFitsTheTerminal(t *testing.T) {
	t.Parallel()
	header := []string{"line", "tenant", "operation_id", "outcome", "detail"}
	why := "NOT proven: source kafka-dlq could not be probed (dial tcp 10.0.0.7:9092: i/o timeout); a source that cannot be probed proves nothing"
	rows := [][]string{{"12", "acme-payments-eu-west", "charge-2026-11-30-000000000042-retry", "error", why}}

	var wide bytes.Buffer
	require.NoError(t, PrintTable(&LayoutWriter{Writer: &wide, Layout: TableLayout{}}, header, rows))
	assert.Greater(t, maxLineWidth(wide.String()), 80, "without a limit, every cell whole")
	assert.Contains(t, wide.String(), why)

	var fit bytes.Buffer
	require.NoError(t, PrintTable(&LayoutWriter{Writer: &fit, Layout: TableLayout{Width: 80}}, header, rows))
	assert.LessOrEqual(t, maxLineWidth(fit.String()), 80, fit.String())
	flat := strings.Join(strings.Fields(strings.ReplaceAll(fit.String(), "│", " ")), " ")
	for _, word := range strings.Fields(why) {
		assert.Contains(t, flat, word, "the explanatory column wraps, whole")
	}
	assert.NotContains(t, fit.String(), "…", "nothing is shortened")
	assert.Contains(t, fit.String(), "charge-2026-11-30-000000000042-retry")
	assert.Contains(t, fit.String(), "acme-payments-eu-west")

	var bare bytes.Buffer
	require.NoError(t, PrintTable(&LayoutWriter{Writer: &bare, Layout: TableLayout{NoHeaders: true}}, header, rows))
	assert.NotContains(t, strings.ToLower(bare.String()), "operation_id")
	assert.Contains(t, bare.String(), "acme-payments-eu-west")

	// A table that fits is left alone.
	small := [][]string{{"1", "acme", "c-1", "applied", "ok"}}
	got, ok := fitTable(header, small, 80)
	assert.True(t, ok)
	assert.Equal(t, small, got.rows)
	assert.Empty(t, got.hidden)
}

// Columns are hidden in their declared order, absolute times first, then
// counts, and the last line names them; an identifier wider than the
// terminal turns the table vertical, the identifier whole on its own line.
func TestTableHidesColumnsThenTurnsVertical(t *testing.T) {
	t.Parallel()
	header := []string{"id", "tenant", "operation", "class", "status", "seen", "changes", "first seen", "last seen"}
	row := []string{"1042", "acme-payments-eu-west", "job-0414-settlement-retry-after-timeout", "demo.transfer", "open", "3", "2",
		"2026-11-30 03:12:09", "2026-11-30 03:14:41"}
	var out bytes.Buffer
	require.NoError(t, PrintTable(&LayoutWriter{Writer: &out, Layout: TableLayout{Width: 130}}, header, [][]string{row}))
	s := out.String()
	assert.LessOrEqual(t, maxLineWidth(s), 130, s)
	assert.Contains(t, s, "2 columns hidden (first seen, last seen): -o wide")
	assert.Contains(t, s, "job-0414-settlement-retry-after-timeout")
	assert.Contains(t, s, "1042")

	row[2] = "job-0414-settlement"
	out.Reset()
	require.NoError(t, PrintTable(&LayoutWriter{Writer: &out, Layout: TableLayout{Width: 80}}, header, [][]string{row}))
	s = out.String()
	assert.LessOrEqual(t, maxLineWidth(s), 80, s)
	assert.Contains(t, s, "job-0414-settlement ")
	assert.Contains(t, s, "4 columns hidden (seen, changes, first seen, last seen): -o wide")

	long := strings.Repeat("x", 100)
	row[2] = long
	out.Reset()
	require.NoError(t, PrintTable(&LayoutWriter{Writer: &out, Layout: TableLayout{Width: 80}}, header, [][]string{row, row}))
	s = out.String()
	assert.Contains(t, s, "\n"+long+"\n", "the identifier whole on its own line")
	assert.Contains(t, s, "tenant:     acme-payments-eu-west\n")
	assert.Contains(t, s, "first seen: 2026-11-30 03:12:09\n", "vertical hides nothing")
	for _, l := range strings.Split(s, "\n") {
		if l != long {
			assert.LessOrEqual(t, ansi.StringWidth(l), 80, l)
		}
	}
}

// Wrapping breaks at spaces, never inside an identifier at its hyphens.
func TestWrapWordsKeepsIdentifiers(t *testing.T) {
	t.Parallel()
	s := "review them: idemctl quarantine list --group g-e33185e2ef13 (or idemctl tui)"
	for width := 16; width <= 40; width++ {
		got := wrapWords(s, width)
		assert.LessOrEqual(t, maxLineWidth(got), width, got)
		assert.Contains(t, got, "g-e33185e2ef13", "width %d: %s", width, got)
		assert.Equal(t, strings.Fields(s), strings.Fields(got))
	}
	assert.Equal(t, "ab\nabcde\nfghij\nk cd", wrapWords("ab abcdefghijk cd", 5), "a word wider than the line is cut")
	assert.Equal(t, "東京\n決済", wrapWords("東京 決済", 4), "by cells, not bytes")
	assert.Equal(t, "ab\nabcdefghijk\ncd", wrapWholeWords("ab abcdefghijk cd", 5), "a word wider than the line stands alone, whole")
}

// A hash in an explaining column (inspect --history's detail) is copied
// whole: at 80 columns it is never cut across two lines, and the table
// that cannot hold it turns vertical rather than hide the time; a JSON
// document with no space is still cut to fit.
func TestTableNeverCutsAHash(t *testing.T) {
	hash := "jcs-sha256:e8b51fbb61cf7a34cbc58ed03066aca8f3fafd4788039c7940316d689e9f8bff"
	header := []string{"at", "event", "detail", "record"}
	rows := [][]string{
		{"2026-12-01 20:31:35.535Z", "applied", "class demo.transfer, hash " + hash + ", no transport", "-"},
		{"2026-12-01 20:32:01.120Z", "decision", "rejected by alice: the retry changed the amount", "audit 7"},
	}
	var out strings.Builder
	require.NoError(t, PrintTable(&LayoutWriter{Writer: &out, Layout: TableLayout{Width: 80}}, header, rows))
	s := out.String()
	assert.LessOrEqual(t, maxLineWidth(s), 80, s)
	assert.Contains(t, s, "\n"+hash+",\n", "the hash whole on a line of its own:\n%s", s)
	assert.Contains(t, s, "at:     2026-12-01 20:31:35.535Z", "the time is not hidden")
	assert.Contains(t, s, "record: audit 7")

	var cut strings.Builder
	doc := `{"amount":` + strings.Repeat("1", 70) + `}`
	require.NoError(t, PrintTable(&LayoutWriter{Writer: &cut, Layout: TableLayout{Width: 80}}, []string{"id", "detail"},
		[][]string{{"1", doc}}))
	assert.LessOrEqual(t, maxLineWidth(cut.String()), 80, cut.String())
	assert.Contains(t, cut.String(), "│ 1  │", "a long JSON document still fits in a table")
}

// A word that cannot wrap (a whole hash) never costs a column: inspect
// --history at 120 columns turns vertical and keeps every event's time, as
// at 80; a sentence that only needs room still hides the time, named.
func TestTableTurnsVerticalRatherThanHideForAHash(t *testing.T) {
	t.Parallel()
	header := []string{"at", "event", "detail", "record"}
	hash := "jcs-sha256:" + strings.Repeat("0123456789abcdef", 4)
	rows := [][]string{
		{"2026-11-30 03:12:09.123Z", "applied", "class demo.transfer, hash " + hash + ", stored response", "-"},
		{"2026-11-30 03:14:41.456Z", "conflict", "quarantine id 7, incoming hash " + hash, "-"},
	}
	for _, width := range []int{80, 120} {
		var out bytes.Buffer
		require.NoError(t, PrintTable(&LayoutWriter{Writer: &out, Layout: TableLayout{Width: width}}, header, rows))
		s := out.String()
		assert.NotContains(t, s, "hidden", "width %d", width)
		assert.Contains(t, s, "at:     2026-11-30 03:12:09.123Z\n", "width %d: vertical, every time kept", width)
		assert.Contains(t, s, hash, "width %d", width)
	}
	var out bytes.Buffer
	require.NoError(t, PrintTable(&LayoutWriter{Writer: &out, Layout: TableLayout{Width: 200}}, header, rows))
	assert.Contains(t, out.String(), "│ 2026-11-30 03:12:09.123Z │", "wide enough: a table")

	prose := strings.Repeat("a long explanation of what happened ", 4)
	rows = [][]string{{"2026-11-30 03:12:09.123Z", "applied", prose + prose, "-"}}
	out.Reset()
	require.NoError(t, PrintTable(&LayoutWriter{Writer: &out, Layout: TableLayout{Width: 60}}, header, rows))
	assert.Contains(t, out.String(), "1 column hidden (at): -o wide", "prose wraps; the time gives way")
}
