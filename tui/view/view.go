// Package view is what every view of the console shares: the Context
// (size, styles, keymap, operator, database, clock), the View each tab
// implements, the banner, the layout helpers, and the Loader of a list view.
// The views (queueview, resolveview, ...) import it; it imports none of them.
package view

import (
	"github.com/charmbracelet/bubbles/help"
	tea "github.com/charmbracelet/bubbletea"
)

// View is one screen of the console. Views mutate in place; Update returns
// the commands that do their I/O.
type View interface {
	// Activate is called each time the view becomes the active one.
	Activate() tea.Cmd
	// Update handles every message (keys only when active).
	Update(msg tea.Msg) tea.Cmd
	// Render draws the body in w×h cells.
	Render(w, h int) string
	// KeyMap is the view's keys in its current state.
	KeyMap() help.KeyMap
	// Typing is true while a text field has the focus.
	Typing() bool
	// Status is the view's current message to the operator.
	Status() Banner
	// Back handles Esc; false when the view is already at its top level.
	Back() (bool, tea.Cmd)
}

// Tall is a view that reads better taller (the evidence of a record): while
// Tall reports true, it gets the lines the banner leaves unused.
type Tall interface {
	Tall() bool
}

// OpenQuarantineMsg asks the root to show one quarantine record in the
// queue view (from the resolve view, after a conflict).
type OpenQuarantineMsg struct{ ID int64 }
