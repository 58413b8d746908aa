package cmdutil

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/assert"
)

// A command fitted to a narrow width still reads as the same command: each
// line fits, a break is a " \" continuation outside quotes, and a flag stays
// with its value.
func TestFitExampleKeepsTheCommand(t *testing.T) {
	t.Parallel()
	cmd := `  idemctl quarantine reject --group g-1a2b3c4d5e6f --reason "mobile 4.2 amount bug, INC-881" --dry-run`
	got := FitExample(cmd+"\n  # a comment that is long enough to need a second line at forty", 50)
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
	assert.Equal(t, cmd, FitExample(cmd, 200), "a line that fits is left alone")
}

// FitText wraps a list item under its text, never cutting a word.
func TestFitTextHangsUnderTheText(t *testing.T) {
	t.Parallel()
	got := FitText("  dsn          which database is named, and where the name came from", 40)
	assert.Equal(t, "  dsn          which database is named,\n               and where the name came\n               from", got)
	assert.Equal(t, "a\nvery-long-identifier-that-stays-whole\nb", FitText("a very-long-identifier-that-stays-whole b", 10))
}
