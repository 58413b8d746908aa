// Package resolveview is the console's resolve view: one ambiguous
// operation typed or loaded into a form (form.go), then the recovery
// protocol run step by step through a Stepper (actions.go), each step's
// finding drawn as it comes (run.go).
package resolveview

import (
	"time"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textarea"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/recovery"
	"github.com/idemctl/idemctl/tui/keys"
	"github.com/idemctl/idemctl/tui/view"
)

// MaxEditablePayload is the largest payload file loaded into the editor; a
// larger one (up to idem.DefaultMaxPayloadBytes) is kept aside unedited.
const MaxEditablePayload = 32 << 10

// The five protocol steps as the view names them.
var stepNames = [5]string{"Primary check", "Lookup", "Hash comparison", "Execute", "Quarantine"}

type stepState int

const (
	stepPending stepState = iota
	stepRunning
	stepOK
	stepFailed
	stepSkipped
	stepFlagged // found something a person must look at (a conflict)
)

// stepLine is one finding of a step: a text, or a labelled value (a hash)
// that the renderer puts on one line or two depending on the width.
type stepLine struct {
	label string
	text  string
	alert bool // highlighted: something a person must look at
}

func text(s string) stepLine          { return stepLine{text: s} }
func alert(s string) stepLine         { return stepLine{text: s, alert: true} }
func kv(label, value string) stepLine { return stepLine{label: label, text: value} }

type stepView struct {
	state stepState
	lines []stepLine
}

func step(state stepState, lines ...stepLine) stepView { return stepView{state: state, lines: lines} }

// resolveRun is one run of the protocol, step by step.
type resolveRun struct {
	seq     int
	in      ResolveInput
	p       idem.Prepared
	steps   [5]stepView
	stored  Stored
	cmp     Comparison
	result  *recovery.Result
	outcome recovery.Outcome
	summary []string
	done    bool
	note    string
}

// Messages of the resolve view.
type (
	// stepGoMsg starts step n (0-based) of run seq after the pacing delay.
	stepGoMsg struct{ seq, n int }
	// stepDoneMsg is step n's finding.
	stepDoneMsg struct {
		seq, n int
		clock  time.Time
		stored Stored
		result recovery.Result
		err    error
	}
	payloadFileMsg struct {
		path string
		data []byte
		err  error
	}
)

// Form fields in tab order.
const (
	fieldTenant = iota
	fieldOperation
	fieldClass
	fieldFile
	fieldPayload
	fieldDryRun
	fieldCount
)

// View is the resolve view; the root model owns it and routes messages to it.
type View struct {
	c     *view.Context
	svc   Stepper
	delay time.Duration

	editing    bool
	focus      int
	tenant     textinput.Model
	op         textinput.Model
	class      textinput.Model
	file       textinput.Model
	payload    textarea.Model
	loaded     []byte // a payload file too large to edit
	loadedFrom string
	dryRun     bool
	confirming bool
	pending    idem.Prepared // what the confirmation shows

	seq int
	run *resolveRun
	top int
	ban view.Banner
}

// New returns the resolve view over its service (nil: the view says it is not
// available); it does no I/O until activated.
func New(c *view.Context, svc Stepper, delay time.Duration) *View {
	v := &View{c: c, svc: svc, delay: delay, dryRun: true}
	v.tenant = view.NewInput(c, "tenant_id, e.g. acme", idem.MaxTenantIDBytes)
	v.op = view.NewInput(c, "operation_id, e.g. charge-42", idem.MaxOperationIDBytes)
	v.class = view.NewInput(c, "operation class, e.g. demo.transfer", 256)
	v.file = view.NewInput(c, "path of a JSON file; enter loads it", 4096)
	ta := textarea.New()
	ta.ShowLineNumbers = false
	ta.Prompt = "│ "
	ta.Placeholder = "the original payload (JSON): type or paste it"
	ta.MaxHeight = 0
	ta.CharLimit = 0
	ta.Cursor.SetMode(cursor.CursorStatic)
	plain := textarea.Style{
		Base: c.Styles.Renderer.NewStyle(), CursorLine: c.Styles.Renderer.NewStyle(),
		CursorLineNumber: c.Styles.Muted, EndOfBuffer: c.Styles.Muted, LineNumber: c.Styles.Muted,
		Placeholder: c.Styles.Muted, Prompt: c.Styles.Muted, Text: c.Styles.Renderer.NewStyle(),
	}
	ta.FocusedStyle, ta.BlurredStyle = plain, plain
	ta.FocusedStyle.Prompt = c.Styles.Focused
	ta.Cursor.Style = c.Styles.Focused
	ta.Blur()
	v.payload = ta
	return v
}

// Activate implements view.View.
func (v *View) Activate() tea.Cmd {
	if v.svc == nil {
		v.ban = view.WarningBanner("the resolve service is not available")
	}
	return nil
}

// Typing implements view.View.
func (v *View) Typing() bool { return v.editing }

// Status implements view.View.
func (v *View) Status() view.Banner { return v.ban }

// Back implements view.View.
func (v *View) Back() (bool, tea.Cmd) {
	switch {
	case v.confirming:
		v.confirming = false
		v.ban = view.InfoBanner("cancelled: nothing ran")
		return true, nil
	case v.run != nil && v.run.done:
		// Back to the form, input kept.
		v.run, v.top = nil, 0
		return true, nil
	}
	return false, nil
}

func (v *View) running() bool { return v.run != nil && !v.run.done }

// Update implements view.View.
func (v *View) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case stepGoMsg:
		if v.run == nil || msg.seq != v.run.seq {
			return nil
		}
		return v.startStep(msg.n)
	case stepDoneMsg:
		if v.run == nil || msg.seq != v.run.seq {
			return nil
		}
		return v.stepDone(msg)
	case payloadFileMsg:
		return v.fileLoaded(msg)
	case tea.KeyMsg:
		if v.editing {
			return v.editKey(msg)
		}
		return v.key(msg)
	}
	return nil
}

func (v *View) key(msg tea.KeyMsg) tea.Cmd {
	k := v.c.Keys.Resolve
	if v.confirming {
		return v.c.Answer(msg, &v.confirming, &v.ban, "cancelled: nothing ran", v.start)
	}
	if v.running() {
		return v.scrollKey(msg)
	}
	if msg.Paste {
		// A paste outside the form is a payload: put it there.
		v.editing = true
		cmd := v.focusField(fieldPayload)
		return tea.Batch(cmd, v.editKey(msg))
	}
	switch {
	case key.Matches(msg, k.Edit):
		v.editing = true
		return v.focusField(v.focus)
	case key.Matches(msg, k.Load):
		v.editing = true
		return v.focusField(fieldFile)
	case key.Matches(msg, k.DryRun):
		v.dryRun = !v.dryRun
		if v.dryRun {
			v.ban = view.InfoBanner("dry run on: the next run (enter) only reads and changes nothing")
		} else {
			v.ban = view.WarningBanner("dry run off: the next run (enter) executes what is missing")
		}
		return nil
	case key.Matches(msg, k.Clear):
		v.setInput(ResolveInput{DryRun: true})
		v.file.SetValue("")
		v.run, v.ban, v.top, v.focus = nil, view.Banner{}, 0, fieldTenant
		return nil
	case key.Matches(msg, k.OpenRec):
		if v.run != nil && v.run.result != nil && v.run.result.QuarantineID > 0 {
			id := v.run.result.QuarantineID
			return func() tea.Msg { return view.OpenQuarantineMsg{ID: id} }
		}
		return nil
	case key.Matches(msg, k.Run):
		return v.requestRun()
	}
	return v.scrollKey(msg)
}

// edit mode

// KeyMap implements view.View.
func (v *View) KeyMap() help.KeyMap {
	k := v.c.Keys
	r := k.Resolve
	switch {
	case v.editing:
		return keys.Bindings{Short: []key.Binding{
			key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next field")),
			key.NewBinding(key.WithKeys("ctrl+r"), key.WithHelp("ctrl+r", "run")),
			key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "done editing")),
		}}
	case v.confirming:
		return keys.Bindings{Short: []key.Binding{k.Confirm.Yes, k.Confirm.No}}
	case v.running():
		return keys.Bindings{Short: []key.Binding{k.Queue.Down}}
	}
	short := []key.Binding{r.Edit, r.Run, r.DryRun, r.Load}
	if v.run != nil && v.run.result != nil && v.run.result.QuarantineID > 0 {
		short = append([]key.Binding{r.OpenRec}, short...)
	}
	return keys.Bindings{Short: short, Full: [][]key.Binding{{r.Edit, r.Run, r.DryRun, r.Load, r.Clear, r.OpenRec},
		{k.Queue.Up, k.Queue.Down, k.Queue.PageUp, k.Queue.PageDown}}}
}

// render

// Render implements view.View.
func (v *View) Render(w, h int) string {
	if v.confirming {
		return v.renderConfirm(w, h)
	}
	if v.editing || v.run == nil {
		return v.renderForm(w, h)
	}
	lines := v.runLines(w)
	top := max(0, min(v.top, len(lines)-h))
	return view.FitLines(lines[top:], w, h)
}
