package textfit

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/assert"
)

// A command fitted to a narrow width still reads as the same command: each
// line fits, a break is a " \" continuation outside quotes, and a flag stays
// with its value.
func TestExampleKeepsTheCommand(t *testing.T) {
	t.Parallel()
	cmd := `  idemctl quarantine reject --group g-1a2b3c4d5e6f --reason "mobile 4.2 amount bug, INC-881" --dry-run`
	got := Example(cmd+"\n  # a comment that is long enough to need a second line at forty", 50)
	lines := strings.Split(got, "\n")
	for _, l := range lines {
		assert.LessOrEqual(t, ansi.StringWidth(l), 50, l)
	}
	assert.Equal(t, []string{
		`  idemctl quarantine reject \`,
		`      --group g-1a2b3c4d5e6f \`,
		`      --reason "mobile 4.2 amount bug, INC-881" \`,
		`      --dry-run`,
		`  # a comment that is long enough to need a second`,
		`  # line at forty`,
	}, lines)
	assert.Equal(t, cmd, Example(cmd, 200), "a line that fits is left alone")
}

// Text wraps a list item under its text, never cutting a word.
func TestTextHangsUnderTheText(t *testing.T) {
	t.Parallel()
	got := Text("  dsn          which database is named, and where the name came from", 40)
	assert.Equal(t, "  dsn          which database is named,\n               and where the name came\n               from", got)
	assert.Equal(t, "a\nvery-long-identifier-that-stays-whole\nb", Text("a very-long-identifier-that-stays-whole b", 10))
}

// Text reflows a paragraph: the words of a line that is too wide move to
// the next line of the same paragraph instead of standing alone, and no word
// is lost or reordered; the next item of a list is not joined.
func TestTextReflowsAParagraph(t *testing.T) {
	text := "  3. if it does not exist: run the operation now, atomically (idem.execute); if a\n" +
		"     first attempt is still alive, the unique constraint settles the race;\n" +
		"  4. if it exists with another hash: conflict, nothing runs."
	got := Text(text, 80)
	lines := strings.Split(got, "\n")
	for _, l := range lines {
		assert.LessOrEqual(t, len(l), 80, l)
		assert.NotEqual(t, "a", strings.TrimSpace(l), "a word alone on a line:\n%s", got)
	}
	assert.Equal(t, strings.Fields(text), strings.Fields(got))
	assert.True(t, strings.HasPrefix(lines[len(lines)-1], "  4. "), got)
	assert.Len(t, lines, 3, got)
}
