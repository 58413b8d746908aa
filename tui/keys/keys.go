// Package keys is the TUI's keymap: one set of key.Binding structs for every
// view, so the same key does the same thing everywhere and the help line is
// generated from the bindings themselves (each set implements help.KeyMap).
package keys

import (
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
)

// Global keys work in every view unless a text field has the focus (then only
// Ctrl-C, and Esc to leave the field).
type Global struct {
	Next  key.Binding
	Prev  key.Binding
	Views [6]key.Binding
	Help  key.Binding
	Back  key.Binding
	Quit  key.Binding
	// ForceQuit works even while typing.
	ForceQuit key.Binding
}

// ShortHelp implements help.KeyMap.
func (k Global) ShortHelp() []key.Binding { return []key.Binding{k.Next, k.Help, k.Quit} }

// FullHelp implements help.KeyMap.
func (k Global) FullHelp() [][]key.Binding {
	return [][]key.Binding{append([]key.Binding{k.Next, k.Prev}, k.Views[:]...), {k.Back, k.Help, k.Quit, k.ForceQuit}}
}

// List moves in a list.
type List struct {
	Up       key.Binding
	Down     key.Binding
	PageUp   key.Binding
	PageDown key.Binding
	Top      key.Binding
	Bottom   key.Binding
}

// Queue is the quarantine queue (list and detail).
type Queue struct {
	List
	Open    key.Binding
	Status  key.Binding
	Search  key.Binding
	Refresh key.Binding
	Reject  key.Binding
	Accept  key.Binding
	// NextPage and PrevPage page through the server's records.
	NextPage key.Binding
	PrevPage key.Binding
	// Select marks records for a bulk decision; Groups toggles the groups.
	Select key.Binding
	Groups key.Binding
	// Copy copies the id or hash at hand to the clipboard (OSC 52).
	Copy key.Binding
}

// Form is any form (decision reason, resolve input).
type Form struct {
	Next   key.Binding
	Prev   key.Binding
	Submit key.Binding
	Cancel key.Binding
}

// Confirm is the confirmation step before every write.
type Confirm struct {
	Yes key.Binding
	No  key.Binding
}

// Resolve is the step-by-step resolve view.
type Resolve struct {
	Edit    key.Binding
	Run     key.Binding
	DryRun  key.Binding
	Load    key.Binding
	Clear   key.Binding
	OpenRec key.Binding
	Toggle  key.Binding
}

// Horizon is the purge-horizon view.
type Horizon struct {
	List
	Approve key.Binding
	Purge   key.Binding
	Refresh key.Binding
}

// Audit is the audit-log view.
type Audit struct {
	List
	Details key.Binding
	// DetailsUp and DetailsDown scroll the details pane of a long row.
	DetailsUp   key.Binding
	DetailsDown key.Binding
	Verify      key.Binding
	Refresh     key.Binding
}

// Reconcile is the reconcile view: saved mappings, a run's findings, one
// finding.
type Reconcile struct {
	List
	Run     key.Binding
	Open    key.Binding
	Pin     key.Binding
	Refresh key.Binding
}

// Approvals is the approvals view: four-eyes plans and what they run.
type Approvals struct {
	List
	Open    key.Binding
	Approve key.Binding
	Refresh key.Binding
}

// KeyMap is every binding of the TUI.
type KeyMap struct {
	Global    Global
	Queue     Queue
	Form      Form
	Confirm   Confirm
	Resolve   Resolve
	Horizon   Horizon
	Audit     Audit
	Reconcile Reconcile
	Approvals Approvals
}

func b(keys []string, helpKey, desc string) key.Binding {
	return key.NewBinding(key.WithKeys(keys...), key.WithHelp(helpKey, desc))
}

func list() List {
	return List{
		Up:       b([]string{"up", "k"}, "↑/k", "up"),
		Down:     b([]string{"down", "j"}, "↓/j", "down"),
		PageUp:   b([]string{"pgup"}, "pgup", "page up"),
		PageDown: b([]string{"pgdown"}, "pgdn", "page down"),
		Top:      b([]string{"home", "g"}, "g/home", "top"),
		Bottom:   b([]string{"end", "G"}, "G/end", "bottom"),
	}
}

// Default returns the keymap.
func Default() KeyMap {
	return KeyMap{
		Global: Global{
			Next: b([]string{"tab"}, "tab", "views"),
			Prev: b([]string{"shift+tab"}, "shift+tab", "previous view"),
			Views: [6]key.Binding{
				b([]string{"1"}, "1", "queue"),
				b([]string{"2"}, "2", "resolve"),
				b([]string{"3"}, "3", "horizon"),
				b([]string{"4"}, "4", "audit"),
				b([]string{"5"}, "5", "reconcile"),
				b([]string{"6"}, "6", "approvals"),
			},
			Help:      b([]string{"?"}, "?", "help"),
			Back:      b([]string{"esc"}, "esc", "back"),
			Quit:      b([]string{"q", "ctrl+c"}, "q", "quit"),
			ForceQuit: b([]string{"ctrl+c"}, "ctrl+c", "quit (always)"),
		},
		Queue: Queue{
			List:     list(),
			Open:     b([]string{"enter"}, "enter", "open"),
			Status:   b([]string{"s"}, "s", "status"),
			Search:   b([]string{"/"}, "/", "search"),
			Refresh:  b([]string{"r"}, "r", "refresh"),
			Reject:   b([]string{"x"}, "x", "reject"),
			Accept:   b([]string{"a"}, "a", "accept as new"),
			NextPage: b([]string{"]", "n"}, "]", "next page"),
			PrevPage: b([]string{"[", "p"}, "[", "previous page"),
			Select:   b([]string{" "}, "space", "select"),
			Groups:   b([]string{"v"}, "v", "groups"),
			Copy:     b([]string{"y"}, "y", "copy id"),
		},
		Form: Form{
			Next:   b([]string{"tab", "down"}, "tab/↓", "next field"),
			Prev:   b([]string{"shift+tab", "up"}, "shift+tab/↑", "previous field"),
			Submit: b([]string{"enter"}, "enter", "review"),
			Cancel: b([]string{"esc"}, "esc", "cancel"),
		},
		Confirm: Confirm{
			Yes: b([]string{"y"}, "y", "confirm"),
			No:  b([]string{"n", "esc"}, "n/esc", "back"),
		},
		Resolve: Resolve{
			Edit:    b([]string{"e"}, "e", "edit"),
			Run:     b([]string{"enter", "ctrl+r"}, "enter", "run"),
			DryRun:  b([]string{"d"}, "d", "dry run"),
			Load:    b([]string{"l"}, "l", "load file"),
			Clear:   b([]string{"c"}, "c", "clear"),
			OpenRec: b([]string{"o"}, "o", "open record"),
			Toggle:  b([]string{" "}, "space", "toggle"),
		},
		Horizon: Horizon{
			List:    list(),
			Approve: b([]string{"a"}, "a", "approve"),
			Purge:   b([]string{"p"}, "p", "purge"),
			Refresh: b([]string{"r"}, "r", "refresh"),
		},
		Audit: Audit{
			List:        list(),
			Details:     b([]string{"enter"}, "enter", "details"),
			DetailsUp:   b([]string{"K", "shift+up"}, "K/shift+↑", "scroll details up"),
			DetailsDown: b([]string{"J", "shift+down"}, "J/shift+↓", "scroll details down"),
			Verify:      b([]string{"v"}, "v", "verify"),
			Refresh:     b([]string{"r"}, "r", "refresh"),
		},
		Reconcile: Reconcile{
			List:    list(),
			Run:     b([]string{"enter"}, "enter", "run"),
			Open:    b([]string{"enter"}, "enter", "open"),
			Pin:     b([]string{"p"}, "p", "pin"),
			Refresh: b([]string{"r"}, "r", "reload"),
		},
		Approvals: Approvals{
			List:    list(),
			Open:    b([]string{"enter"}, "enter", "open"),
			Approve: b([]string{"a"}, "a", "approve"),
			Refresh: b([]string{"r"}, "r", "refresh"),
		},
	}
}

// Bindings is an ad-hoc help.KeyMap: a view's keys in its current state,
// short help first.
type Bindings struct {
	Short []key.Binding
	Full  [][]key.Binding
}

// ShortHelp implements help.KeyMap.
func (k Bindings) ShortHelp() []key.Binding { return k.Short }

// FullHelp implements help.KeyMap.
func (k Bindings) FullHelp() [][]key.Binding {
	if k.Full == nil {
		return [][]key.Binding{k.Short}
	}
	return k.Full
}

// Combined puts a view's keys before the global ones.
type Combined struct {
	View   help.KeyMap
	Global Global
	// Typing is true while a text field has the focus: the global keys other
	// than Esc and Ctrl-C then type text instead.
	Typing bool
}

// ShortHelp implements help.KeyMap.
func (c Combined) ShortHelp() []key.Binding {
	out := append([]key.Binding{}, c.View.ShortHelp()...)
	if c.Typing {
		return append(out, c.Global.ForceQuit)
	}
	return append(out, c.Global.ShortHelp()...)
}

// FullHelp implements help.KeyMap.
func (c Combined) FullHelp() [][]key.Binding {
	return append(append([][]key.Binding{}, c.View.FullHelp()...), c.Global.FullHelp()...)
}
