package resolveview

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textarea"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

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

func (v *View) Activate() tea.Cmd {
	if v.svc == nil {
		v.ban = view.WarningBanner("the resolve service is not available")
	}
	return nil
}

func (v *View) Typing() bool { return v.editing }

func (v *View) Status() view.Banner { return v.ban }

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

// input is what the form holds.
func (v *View) input() ResolveInput {
	payload := []byte(v.payload.Value())
	if v.loaded != nil {
		payload = v.loaded
	}
	return ResolveInput{
		Tenant:      strings.TrimSpace(v.tenant.Value()),
		OperationID: strings.TrimSpace(v.op.Value()),
		Class:       strings.TrimSpace(v.class.Value()),
		Payload:     payload,
		DryRun:      v.dryRun,
	}
}

// SetInput fills the form (tests, and a future "resolve this" from another view).
func (v *View) setInput(in ResolveInput) {
	v.tenant.SetValue(in.Tenant)
	v.op.SetValue(in.OperationID)
	v.class.SetValue(in.Class)
	v.payload.SetValue(string(in.Payload))
	v.loaded, v.loadedFrom = nil, ""
	v.dryRun = in.DryRun
}

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
		switch {
		case key.Matches(msg, v.c.Keys.Confirm.Yes):
			v.confirming = false
			return v.start()
		case key.Matches(msg, v.c.Keys.Confirm.No):
			v.confirming = false
			v.ban = view.InfoBanner("cancelled: nothing ran")
		}
		return nil
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

func (v *View) scrollKey(msg tea.KeyMsg) tea.Cmd {
	if v.run == nil {
		return nil
	}
	k := v.c.Keys.Queue.List
	h := v.c.BodyHeight()
	switch {
	case key.Matches(msg, k.Up):
		v.top--
	case key.Matches(msg, k.Down):
		v.top++
	case key.Matches(msg, k.PageUp):
		v.top -= h
	case key.Matches(msg, k.PageDown):
		v.top += h
	case key.Matches(msg, k.Top):
		v.top = 0
	case key.Matches(msg, k.Bottom):
		v.top = 1 << 30
	}
	v.top = max(0, min(v.top, len(v.runLines(v.c.Width))-h))
	return nil
}

// requestRun checks the input; a real run asks for confirmation first.
func (v *View) requestRun() tea.Cmd {
	if v.svc == nil {
		v.ban = view.WarningBanner("the resolve service is not available")
		return nil
	}
	p, err := v.input().Prepare()
	if err != nil {
		v.ban = view.ErrorBanner(fmt.Errorf("input: %w", err))
		return nil
	}
	v.pending = p
	if v.dryRun {
		return v.start()
	}
	v.confirming = true
	v.ban = view.Banner{}
	return nil
}

// start begins a run at step 1.
func (v *View) start() tea.Cmd {
	in := v.input()
	p, err := in.Prepare()
	if err != nil {
		v.ban = view.ErrorBanner(fmt.Errorf("input: %w", err))
		return nil
	}
	v.seq++
	v.run = &resolveRun{seq: v.seq, in: in, p: p}
	v.top, v.ban = 0, view.Banner{}
	return v.startStep(0)
}

func (v *View) startStep(n int) tea.Cmd {
	r := v.run
	r.steps[n].state = stepRunning
	svc, seq, p, op := v.svc, r.seq, r.p, v.c.Operator
	switch n {
	case 0:
		r.steps[0].lines = []stepLine{text("is this the authoritative primary?")}
		return func() tea.Msg {
			ctx, cancel := v.c.CmdContext()
			defer cancel()
			clock, err := svc.CheckPrimary(ctx)
			return stepDoneMsg{seq: seq, n: 0, clock: clock, err: err}
		}
	case 1:
		r.steps[1].lines = []stepLine{text("reading the inbox (read-only)…")}
		dry := r.in.DryRun
		return func() tea.Msg {
			ctx, cancel := v.c.CmdContext()
			defer cancel()
			st, err := svc.Lookup(ctx, p, op, dry)
			return stepDoneMsg{seq: seq, n: 1, stored: st, err: err}
		}
	case 2:
		stored := r.stored
		return func() tea.Msg { return stepDoneMsg{seq: seq, n: 2, stored: stored} }
	default:
		r.steps[3].lines = []stepLine{text("the atomic executor settles it (one transaction)…")}
		r.steps[4] = step(stepRunning, text("waiting for the executor"))
		return func() tea.Msg {
			ctx, cancel := v.c.CmdContext()
			defer cancel()
			res, err := svc.Execute(ctx, p, op)
			return stepDoneMsg{seq: seq, n: 3, result: res, err: err}
		}
	}
}

// next schedules step n after the pacing delay.
func (v *View) next(n int) tea.Cmd {
	seq := v.run.seq
	if v.delay <= 0 {
		return v.startStep(n)
	}
	v.run.steps[n].state = stepRunning
	return tea.Tick(v.delay, func(time.Time) tea.Msg { return stepGoMsg{seq: seq, n: n} })
}

// stop ends the run: the remaining steps did not run.
func (v *View) stop(from int, why string) {
	for i := from; i < len(v.run.steps); i++ {
		v.run.steps[i] = step(stepSkipped, text(why))
	}
	v.run.done = true
}

func (v *View) stepDone(msg stepDoneMsg) tea.Cmd {
	r := v.run
	switch msg.n {
	case 0:
		if msg.err != nil {
			r.steps[0] = step(stepFailed, alert(view.OneLine(msg.err.Error())))
			r.outcome = "refused"
			if !errors.Is(msg.err, recovery.ErrNotPrimary) {
				r.outcome = recovery.Failed
			}
			r.summary = []string{"Nothing was concluded and nothing was written."}
			v.stop(1, "not run")
			return nil
		}
		r.steps[0] = step(stepOK, text("primary, read-write; clock "+view.Stamp(msg.clock)))
		return v.next(1)
	case 1:
		if msg.err != nil {
			r.steps[1] = step(stepFailed, alert(view.OneLine(msg.err.Error())))
			r.outcome = recovery.Failed
			r.summary = []string{"Nothing was written for this operation."}
			v.stop(2, "not run")
			return nil
		}
		r.stored = msg.stored
		if !msg.stored.Found {
			r.steps[1] = step(stepOK, text("absent: the inbox has no row for this identity"))
		} else {
			r.steps[1] = step(stepOK, text("found: class "+msg.stored.Class+"; its hash is compared next"))
		}
		return v.next(2)
	case 2:
		r.cmp = Compare(r.p, r.stored)
		v.describeComparison()
		if r.in.DryRun {
			r.outcome = r.cmp.Outcome
			switch r.cmp.Outcome {
			case recovery.WouldApply:
				r.steps[3] = step(stepSkipped, text("dry run: a real run executes it now, atomically"))
				r.steps[4] = step(stepSkipped, text("not needed"))
				r.summary = []string{"A real run would apply it: inbox row, effect and response in one transaction."}
			case recovery.WouldRedrive:
				r.steps[3] = step(stepSkipped, text("dry run: a real run re-drives it through its class's service, then reads the primary"))
				r.steps[4] = step(stepSkipped, text("not needed"))
				r.summary = []string{"A real run would send it to its service with its own identity, and answer from the primary."}
			case recovery.AlreadyApplied:
				r.steps[3] = step(stepSkipped, text("not needed: nothing runs twice"))
				r.steps[4] = step(stepSkipped, text("not needed"))
				r.summary = []string{"Applied before: a real run returns the saved response and runs nothing."}
			default:
				r.steps[3] = step(stepSkipped, text("never: it would be a second execution"))
				r.steps[4] = step(stepFlagged, alert("dry run: a real run quarantines it with its evidence"))
				r.summary = []string{"Same identity, another payload: a person must decide."}
			}
			r.summary = append(r.summary, "Dry run: nothing was executed or quarantined.")
			r.done = true
			return nil
		}
		return v.next(3)
	default:
		return v.executed(msg)
	}
}

func (v *View) describeComparison() {
	r := v.run
	switch {
	case !r.stored.Found:
		r.steps[2] = step(stepOK, text("nothing to compare: the identity is absent"))
	case r.cmp.HashEqual && r.cmp.ClassEqual:
		r.steps[2] = step(stepOK, text("equal canonical hashes: it was already applied"))
	default:
		lines := []stepLine{alert("! DIFFERENT: same identity, another payload")}
		if !r.cmp.HashEqual {
			lines = append(lines, kv("stored  ", r.stored.Hash), kv("incoming", r.p.Hash))
		}
		if !r.cmp.ClassEqual {
			lines = append(lines, kv("class   ", "stored "+r.stored.Class+", incoming "+r.p.Class))
		}
		r.steps[2] = step(stepFlagged, lines...)
	}
}

func (v *View) executed(msg stepDoneMsg) tea.Cmd {
	r := v.run
	r.done = true
	if msg.err != nil && msg.result.Outcome == "" {
		r.steps[3] = step(stepFailed, alert(view.OneLine(msg.err.Error())))
		r.steps[4] = step(stepSkipped, text("not run"))
		r.outcome = recovery.Failed
		if errors.Is(msg.err, recovery.ErrNotPrimary) {
			r.outcome = "refused"
		}
		r.summary = []string{"Nothing was written for this operation (the transaction rolled back)."}
		return nil
	}
	res := msg.result
	r.result, r.outcome = &res, res.Outcome
	if msg.err != nil {
		// The operation settled but something around it failed (its audit record).
		r.note = "warning: " + view.OneLine(msg.err.Error())
	}
	if d := res.Redrive; d != nil {
		return v.redriven(res, d)
	}
	switch res.Outcome {
	case recovery.Applied:
		r.steps[3] = step(stepOK, text("ran now: inbox row, effect, response in one transaction"))
		r.steps[4] = step(stepSkipped, text("not needed"))
		r.summary = []string{"Applied now. Saved response:"}
	case recovery.AlreadyApplied:
		r.steps[3] = step(stepOK, text("nothing ran: already applied; saved response returned"))
		r.steps[4] = step(stepSkipped, text("not needed"))
		r.summary = []string{"Already applied. Saved response:"}
	case recovery.Conflict:
		r.steps[3] = step(stepSkipped, text("not executed: it would be a second execution"))
		r.steps[4] = step(stepFlagged, alert(fmt.Sprintf("quarantined as #%d with its evidence", res.QuarantineID)),
			text("automatic replay blocked until a person decides (o opens it)"))
		r.summary = []string{"Conflict: this request did not run and gets no response."}
	case recovery.Purged:
		r.steps[3] = step(stepSkipped, text("not executed: purged under a proven horizon"))
		r.steps[4] = step(stepSkipped, text("not needed"))
		r.summary = []string{"Purged: covered by a proven replay horizon."}
	default:
		r.steps[3] = step(stepFailed, alert(fmt.Sprintf("%s: %v", res.Outcome, res.Err)))
		r.steps[4] = step(stepSkipped, text("not run"))
		r.summary = []string{"Nothing was written for this operation."}
	}
	predicted := map[recovery.Outcome]recovery.Outcome{
		recovery.WouldApply: recovery.Applied, recovery.AlreadyApplied: recovery.AlreadyApplied, recovery.WouldConflict: recovery.Conflict,
	}[r.cmp.Outcome]
	if predicted != "" && res.Outcome != predicted && res.Outcome != recovery.Failed {
		r.summary = append([]string{"The identity changed between the lookup and the execution (another attempt",
			"was alive); the executor's answer stands."}, r.summary...)
	}
	return nil
}

// edit mode

func (v *View) focusField(i int) tea.Cmd {
	v.focus = (i + fieldCount) % fieldCount
	v.tenant.Blur()
	v.op.Blur()
	v.class.Blur()
	v.file.Blur()
	v.payload.Blur()
	switch v.focus {
	case fieldTenant:
		return v.tenant.Focus()
	case fieldOperation:
		return v.op.Focus()
	case fieldClass:
		return v.class.Focus()
	case fieldFile:
		return v.file.Focus()
	case fieldPayload:
		return v.payload.Focus()
	}
	return nil
}

func (v *View) stopEditing() {
	v.editing = false
	v.tenant.Blur()
	v.op.Blur()
	v.class.Blur()
	v.file.Blur()
	v.payload.Blur()
}

func (v *View) editKey(msg tea.KeyMsg) tea.Cmd {
	switch msg.Type {
	case tea.KeyEsc:
		v.stopEditing()
		return nil
	case tea.KeyTab:
		return v.focusField(v.focus + 1)
	case tea.KeyShiftTab:
		return v.focusField(v.focus - 1)
	case tea.KeyCtrlR:
		v.stopEditing()
		return v.requestRun()
	}
	if v.focus != fieldPayload {
		switch msg.Type {
		case tea.KeyDown:
			return v.focusField(v.focus + 1)
		case tea.KeyUp:
			return v.focusField(v.focus - 1)
		case tea.KeyEnter:
			if v.focus == fieldFile {
				return v.loadFile(strings.TrimSpace(v.file.Value()))
			}
			if v.focus == fieldDryRun {
				v.dryRun = !v.dryRun
				return nil
			}
			return v.focusField(v.focus + 1)
		}
	}
	var cmd tea.Cmd
	switch v.focus {
	case fieldTenant:
		v.tenant, cmd = v.tenant.Update(msg)
	case fieldOperation:
		v.op, cmd = v.op.Update(msg)
	case fieldClass:
		v.class, cmd = v.class.Update(msg)
	case fieldFile:
		v.file, cmd = v.file.Update(msg)
	case fieldPayload:
		if v.loaded != nil {
			v.ban = view.InfoBanner("the payload was loaded from a file too large to edit; c clears it")
			return nil
		}
		v.payload, cmd = v.payload.Update(msg)
	case fieldDryRun:
		if msg.Type == tea.KeySpace || (msg.Type == tea.KeyRunes && string(msg.Runes) == "d") {
			v.dryRun = !v.dryRun
		}
	}
	return cmd
}

// loadFile reads a payload file inside a tea.Cmd.
func (v *View) loadFile(path string) tea.Cmd {
	if path == "" {
		v.ban = view.InfoBanner("type the path of a JSON file, then enter")
		return nil
	}
	if strings.HasPrefix(path, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			path = home + path[1:]
		}
	}
	return func() tea.Msg {
		f, err := os.Open(path)
		if err != nil {
			return payloadFileMsg{path: path, err: err}
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, int64(idem.DefaultMaxPayloadBytes)+1))
		if err == nil && len(data) > idem.DefaultMaxPayloadBytes {
			err = fmt.Errorf("larger than %d bytes, the payload limit", idem.DefaultMaxPayloadBytes)
		}
		return payloadFileMsg{path: path, data: data, err: err}
	}
}

func (v *View) fileLoaded(msg payloadFileMsg) tea.Cmd {
	if msg.err != nil {
		v.ban = view.ErrorBanner(fmt.Errorf("load %s: %w", msg.path, msg.err))
		return nil
	}
	if len(msg.data) > MaxEditablePayload {
		v.payload.SetValue("")
		v.loaded, v.loadedFrom = msg.data, msg.path
	} else {
		v.loaded, v.loadedFrom = nil, ""
		v.payload.SetValue(string(msg.data))
	}
	v.ban = view.SuccessBanner("loaded %d bytes from %s", len(msg.data), msg.path)
	if v.editing {
		return v.focusField(fieldPayload)
	}
	return nil
}

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

func (v *View) dryRunLabel() string {
	st := v.c.Styles
	if v.dryRun {
		return st.Success.Render("[x] dry run") + st.Muted.Render(" (look up only, write nothing)")
	}
	return st.Warning.Render("[ ] dry run") + st.Muted.Render(" (OFF: a real run executes or quarantines)")
}

func (v *View) renderForm(w, h int) string {
	st := v.c.Styles
	lines := []string{st.Title.Render("Resolve one ambiguous operation") + st.Muted.Render("  the recovery protocol, step by step"), ""}
	inW := max(10, w-18)
	field := func(i int, name, shown string) {
		lbl := st.Label.Render("  " + view.Pad(name, 14))
		if v.editing && v.focus == i {
			lbl = st.Focused.Render("> " + view.Pad(name, 14))
		}
		lines = append(lines, lbl+shown)
	}
	for _, f := range []struct {
		i    int
		name string
		in   *textinput.Model
	}{{fieldTenant, "tenant", &v.tenant}, {fieldOperation, "operation id", &v.op}, {fieldClass, "class", &v.class}, {fieldFile, "payload file", &v.file}} {
		f.in.Width = inW
		field(f.i, f.name, f.in.View())
	}
	payloadH := max(3, min(8, h-12))
	if v.loaded != nil {
		field(fieldPayload, "payload", st.Info.Render(fmt.Sprintf("%d bytes loaded from %s (too large to edit; c clears)", len(v.loaded), v.loadedFrom)))
	} else {
		v.payload.SetWidth(inW)
		v.payload.SetHeight(payloadH)
		pl := strings.Split(v.payload.View(), "\n")
		field(fieldPayload, "payload", pl[0])
		for _, l := range pl[1:] {
			lines = append(lines, strings.Repeat(" ", 16)+l)
		}
	}
	field(fieldDryRun, "", v.dryRunLabel())
	lines = append(lines, "")
	if v.editing {
		lines = append(lines, st.Muted.Render("tab next field · enter on payload file loads it · ctrl+r run · esc done"))
	} else {
		lines = append(lines, st.Muted.Render("e edit · l load a payload file · d toggle dry run · enter run"))
	}
	return view.FitLines(lines, w, h)
}

func (v *View) renderConfirm(w, h int) string {
	st := v.c.Styles
	p := v.pending
	lines := []string{st.Warning.Render("Confirm a REAL run (dry run is off)"), ""}
	row := func(k, val string) { lines = append(lines, st.Label.Render("  "+view.Pad(k, 14))+val) }
	row("identity", p.TenantID+"/"+p.OperationID)
	row("class", p.Class)
	lines = append(lines, view.Labelled("  "+view.Pad("payload hash", 14), st.Label, st.HashIncoming.Render(p.Hash), w, 4)...)
	row("operator", v.c.Operator)
	lines = append(lines, "",
		"If the identity is absent the operation executes now (its effect commits);",
		"if it exists with another payload the request is quarantined.",
		"", st.Focused.Render("y")+" run it   "+st.Focused.Render("n/esc")+" cancel")
	return view.FitLines(view.WrapAll(lines, w), w, h)
}

func (v *View) stepMarker(s stepState) string {
	st := v.c.Styles
	switch s {
	case stepRunning:
		return st.StepRunning.Render("[..]")
	case stepOK:
		return st.StepOK.Render("[ok]")
	case stepFailed:
		return st.StepFailed.Render("[xx]")
	case stepSkipped:
		return st.StepSkipped.Render("[--]")
	case stepFlagged:
		return st.StepFailed.Render("[!!]")
	}
	return st.StepPending.Render("[  ]")
}

func (v *View) runLines(w int) []string {
	st := v.c.Styles
	r := v.run
	mode := st.Success.Render("DRY RUN")
	if !r.in.DryRun {
		mode = st.Warning.Render("REAL RUN")
	}
	lines := []string{st.Title.Render("Resolve "+r.p.TenantID+"/"+r.p.OperationID) + " " + st.Muted.Render("("+r.p.Class+")") + "  " + mode}
	lines = append(lines, view.Labelled("incoming hash", st.Label, st.HashIncoming.Render(r.p.Hash), w, 5)...)
	lines = append(lines, "")
	const titleW = 17
	for i, s := range r.steps {
		style := st.Label
		if s.state == stepRunning {
			style = st.StepRunning
		}
		head := v.stepMarker(s.state) + " " + style.Render(view.Pad(fmt.Sprintf("%d %s", i+1, stepNames[i]), titleW))
		rest := s.lines
		if len(rest) > 0 && rest[0].label == "" && 4+1+titleW+1+lipgloss.Width(rest[0].text) <= w {
			head += " " + v.stepText(rest[0])
			rest = rest[1:]
		}
		lines = append(lines, head)
		for _, l := range rest {
			if l.label != "" {
				lines = append(lines, view.Indent("     ", view.Labelled(l.label, st.Label, st.HashStored.Render(l.text), w-5, 0))...)
				continue
			}
			lines = append(lines, view.Indent("     ", view.Wrap(v.stepText(l), max(10, w-5)))...)
		}
	}
	if !r.done {
		return lines
	}
	lines = append(lines, "", st.Label.Render("outcome ")+v.outcomeStyle(r.outcome).Render(string(r.outcome)))
	for _, l := range r.summary {
		lines = append(lines, view.Wrap(l, w)...)
	}
	if r.result != nil && (r.result.Outcome == recovery.Applied || r.result.Outcome == recovery.AlreadyApplied) {
		lines = append(lines, view.Indent("  ", view.Wrap(view.PrettyJSON(r.result.Response), max(10, w-2)))...)
	}
	if r.note != "" {
		lines = append(lines, view.Wrap(st.Warning.Render(r.note), w)...)
	}
	return lines
}

func (v *View) stepText(l stepLine) string {
	if l.alert {
		return v.c.Styles.DiffIncoming.Render(l.text)
	}
	return l.text
}

func (v *View) outcomeStyle(o recovery.Outcome) lipgloss.Style {
	st := v.c.Styles
	switch o {
	case recovery.Applied, recovery.AlreadyApplied, recovery.WouldApply:
		return st.StepOK
	case recovery.Conflict, recovery.WouldConflict:
		return st.Open
	}
	return st.StepFailed
}

// redriven shows a re-drive through the class's service: what was sent,
// what it replied, and what the primary says (the answer).
func (v *View) redriven(res recovery.Result, d *recovery.RedriveTrace) tea.Cmd {
	r := v.run
	lines := []stepLine{
		text("re-driven through its service, with its own identity"),
		kv("sent to ", d.Via+" "+d.Target),
		kv("replies ", strings.Join(d.Replies, ", ")),
		kv("primary ", d.Verified),
	}
	state := stepOK
	switch res.Outcome {
	case recovery.Applied:
		r.summary = []string{"Applied now by its service, verified on the primary. Saved response:"}
	case recovery.AlreadyApplied:
		r.summary = []string{"An earlier attempt won the race; verified on the primary. Saved response:"}
	case recovery.Pending:
		state = stepFlagged
		r.summary = []string{"Published; its service has not recorded it yet. Run it again later: it never runs twice."}
	case recovery.Conflict:
		state = stepFlagged
		r.summary = []string{"The primary holds another payload under this identity: quarantined."}
	default:
		state = stepFailed
		if res.Err != nil {
			lines = append(lines, alert(view.OneLine(res.Err.Error())))
		}
		r.summary = []string{"Not settled: the error says why."}
	}
	r.steps[3] = step(state, lines...)
	r.steps[4] = step(stepSkipped, text("not needed"))
	return nil
}
