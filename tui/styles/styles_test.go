package styles

import (
	"bytes"
	"strings"
	"testing"

	"github.com/muesli/termenv"
)

// NO_COLOR: not one escape sequence, whatever the output supports; with
// colour, the highlights are coloured.
func TestNoColor(t *testing.T) {
	t.Parallel()
	plain := ForOutput(&bytes.Buffer{}, true)
	if !plain.NoColor || plain.Profile() != termenv.Ascii {
		t.Fatalf("noColor: profile %v", plain.Profile())
	}
	for _, s := range []string{plain.Error.Render("x"), plain.DiffIncoming.Render("1000"), plain.Selected.Render("row"), plain.ActiveTab.Render("tab")} {
		if strings.Contains(s, "\x1b") {
			t.Fatalf("escape sequence with NO_COLOR: %q", s)
		}
	}
	if Ascii().Error.Render("x") != "x" {
		t.Fatal("Ascii styles render escape sequences")
	}

	coloured := ForOutput(&bytes.Buffer{}, false)
	coloured.Renderer.SetColorProfile(termenv.ANSI256)
	coloured = New(coloured.Renderer)
	if coloured.NoColor {
		t.Fatal("ANSI256 taken for no colour")
	}
	if s := coloured.DiffIncoming.Render("1000"); !strings.Contains(s, "\x1b[") {
		t.Fatalf("no colour on an ANSI256 output: %q", s)
	}
}

func TestNoColorEnv(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	if NoColorEnv() {
		t.Fatal("empty NO_COLOR counts as set")
	}
	t.Setenv("NO_COLOR", "1")
	if !NoColorEnv() {
		t.Fatal("NO_COLOR=1 ignored")
	}
}
