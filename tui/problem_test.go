package tui

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/stretchr/testify/assert"

	"github.com/idemctl/idemctl/tui/styles"
)

// On a database the console cannot use, it says why and which database,
// instead of a queue that looks empty; no view loads and keys do nothing but
// quit.
func TestModelProblemReplacesTheViews(t *testing.T) {
	t.Parallel()
	st := styles.Ascii()
	problem := "alice@db1:5432/payments (service prod): schema idem is missing: run idemctl migrate as a superuser"
	m := New(Options{Operator: "alice", Database: "alice@db1:5432/payments (service prod)", Problem: problem,
		Now: func() time.Time { return fixedNow }, Styles: &st, Refresh: -1})
	assert.Nil(t, m.Init(), "nothing is loaded")
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	v := m.View()
	assert.Contains(t, v, "(service prod)")
	assert.Contains(t, v, "schema idem is missing")
	assert.Contains(t, strings.Join(strings.Fields(v), " "), "run idemctl migrate as a superuser", "wrapped, whole")
	assert.NotContains(t, v, "No open records")
	assert.NotContains(t, v, "1 Queue")

	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("2")})
	assert.Nil(t, cmd)
	assert.Equal(t, TabQueue, m.Active())
	_, cmd = m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
	assert.NotNil(t, cmd, "q quits")
}
