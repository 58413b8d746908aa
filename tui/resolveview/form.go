package resolveview

import "github.com/idemctl/idemctl/recovery"

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
