package resolveview

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/recovery"
	"github.com/idemctl/idemctl/tui/view"
)

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

// setInput fills the form (tests, and a future "resolve this" from another view).
func (v *View) setInput(in ResolveInput) {
	v.tenant.SetValue(in.Tenant)
	v.op.SetValue(in.OperationID)
	v.class.SetValue(in.Class)
	v.payload.SetValue(string(in.Payload))
	v.loaded, v.loadedFrom = nil, ""
	v.dryRun = in.DryRun
}

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

// Form is what the resolve form holds and what the last run executed: the
// console's own tests check with it what their keys did.
type Form struct {
	// Editing is true while a field of the form has the focus;
	// PayloadFocused while that field is the payload.
	Editing        bool
	PayloadFocused bool
	// Editor is the payload field's text; Input is what a run would take
	// (a payload file too large to edit is kept aside, not in the editor).
	Editor string
	Input  ResolveInput
	// Result is what the last run executed; nil when it executed nothing.
	Result *recovery.Result
}

// Form returns what the form holds.
func (v *View) Form() Form {
	f := Form{Editing: v.editing, PayloadFocused: v.focus == fieldPayload, Editor: v.payload.Value(), Input: v.input()}
	if v.run != nil {
		f.Result = v.run.result
	}
	return f
}

// SetFile sets the text of the payload file field, as if typed.
func (v *View) SetFile(path string) { v.file.SetValue(path) }
