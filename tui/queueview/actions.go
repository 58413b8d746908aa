package queueview

import (
	"errors"
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/quarantine"
	"github.com/idemctl/idemctl/tui/view"
)

// decision is the action a form prepares.
type decision int

const (
	decideReject decision = iota + 1
	decideAccept
)

func (d decision) verb() string {
	if d == decideAccept {
		return "accept as new"
	}
	return "reject"
}

func (v *View) startForm(d decision) tea.Cmd {
	if v.rec == nil {
		v.ban = view.InfoBanner("the record is still loading")
		return nil
	}
	if v.rec.Status != quarantine.StatusOpen {
		by := ""
		if v.rec.Decision != nil {
			by = " by " + v.rec.Decision.By
		}
		v.ban = view.WarningBanner("record #%d was already %s%s: decisions are final", v.rec.ID, v.rec.Status, by)
		return nil
	}
	v.action, v.mode = d, queueForm
	v.reason.SetValue("")
	v.newOp.SetValue("")
	v.ban = view.Banner{}
	return v.focusField(0)
}

// fields are the form's inputs in tab order.
func (v *View) fields() []*textinput.Model {
	if v.action == decideAccept {
		return []*textinput.Model{&v.newOp, &v.reason}
	}
	return []*textinput.Model{&v.reason}
}

func (v *View) focusField(i int) tea.Cmd {
	fs := v.fields()
	v.focus = (i + len(fs)) % len(fs)
	for j, f := range fs {
		if j != v.focus {
			f.Blur()
		}
	}
	return fs[v.focus].Focus()
}

func (v *View) blurForm() {
	for _, f := range v.fields() {
		f.Blur()
	}
}

func (v *View) formKey(msg tea.KeyMsg) tea.Cmd {
	k := v.c.Keys.Form
	switch {
	case key.Matches(msg, k.Cancel):
		v.blurForm()
		v.mode = queueDetail
		v.ban = view.InfoBanner("cancelled: nothing was decided")
		return nil
	case key.Matches(msg, k.Next):
		return v.focusField(v.focus + 1)
	case key.Matches(msg, k.Prev):
		return v.focusField(v.focus - 1)
	case key.Matches(msg, k.Submit):
		if err := v.validateForm(); err != nil {
			v.ban = view.ErrorBanner(err)
			return nil
		}
		v.blurForm()
		v.mode = queueConfirm
		v.ban = view.Banner{}
		return nil
	}
	var cmd tea.Cmd
	f := v.fields()[v.focus]
	*f, cmd = f.Update(msg)
	return cmd
}

// validateForm checks the form before the confirmation, as the domain will.
func (v *View) validateForm() error {
	if strings.TrimSpace(v.reason.Value()) == "" {
		return errors.New("a reason is required: it is recorded with the decision and in the audit log")
	}
	if v.action == decideAccept {
		op := strings.TrimSpace(v.newOp.Value())
		if op == "" {
			return errors.New("a new operation id is required: the payload runs once under it")
		}
		if err := (idem.Identity{TenantID: v.rec.Tenant, OperationID: op}).Validate(); err != nil {
			return err
		}
		if op == v.rec.OperationID {
			return fmt.Errorf("the new operation id must differ from the conflicting one (%s)", op)
		}
	}
	return nil
}

func (v *View) confirmKey(msg tea.KeyMsg) tea.Cmd {
	k := v.c.Keys.Confirm
	switch {
	case key.Matches(msg, k.Yes):
		return v.decide()
	case key.Matches(msg, k.No):
		v.mode = queueForm
		return v.focusField(v.focus)
	}
	return nil
}

func (v *View) decide() tea.Cmd {
	v.mode = queueDeciding
	id, action, svc, op := v.rec.ID, v.action, v.svc, v.c.Operator
	reason, newOp := strings.TrimSpace(v.reason.Value()), strings.TrimSpace(v.newOp.Value())
	return func() tea.Msg {
		ctx, cancel := v.c.CmdContext()
		defer cancel()
		if action == decideAccept {
			acc, err := svc.AcceptAsNew(ctx, id, newOp, op, reason)
			if errors.Is(err, quarantine.ErrNeedsSecondPerson) {
				plan, err := svc.PlanAcceptOne(ctx, id, newOp, op, reason)
				return decidedMsg{action: action, id: id, plan: &plan, err: err}
			}
			return decidedMsg{action: action, id: id, rec: acc.Record, acc: &acc, err: err}
		}
		rec, err := svc.Reject(ctx, id, op, reason)
		return decidedMsg{action: action, id: id, rec: rec, err: err}
	}
}

func (v *View) decided(msg decidedMsg) tea.Cmd {
	if msg.err != nil {
		v.ban = view.ErrorBanner(fmt.Errorf("%s #%d refused: %w", msg.action.verb(), msg.id, msg.err))
		if errors.Is(msg.err, quarantine.ErrAlreadyDecided) || errors.Is(msg.err, quarantine.ErrNotFound) {
			v.mode = queueDetail
			return v.loadRecord(msg.id)
		}
		v.mode = queueForm
		return v.focusField(v.focus)
	}
	if msg.plan != nil {
		v.mode = queueDetail
		v.ban = view.SuccessBanner("#%d is of a money class: planned as accept-as-new plan #%d, nothing ran; another person approves it (6 Approvals)",
			msg.id, msg.plan.ID)
		return v.loadRecord(msg.id)
	}
	rec := msg.rec
	v.rec, v.detailID, v.mode, v.dtop = &rec, rec.ID, queueDetail, 0
	audit := ""
	if rec.Decision != nil {
		audit = fmt.Sprintf("; audit row #%d", rec.Decision.AuditID)
	}
	if msg.action == decideAccept && msg.acc != nil {
		v.ban = view.SuccessBanner("accepted #%d as new operation %s/%s: %s%s",
			rec.ID, rec.Tenant, rec.Decision.NewOperationID, msg.acc.Outcome, audit)
	} else {
		v.ban = view.SuccessBanner("rejected #%d: it will never run, replays stay refused%s", rec.ID, audit)
	}
	return v.load(false)
}

func (v *View) formHeader(w int) []string {
	st := v.c.Styles
	r := v.rec
	var lines []string
	if v.action == decideAccept {
		lines = append(lines, st.Title.Render(fmt.Sprintf("Accept #%d as a new operation", r.ID)),
			fmt.Sprintf("The incoming payload runs once, now, under tenant %s and the new operation id,", r.Tenant),
			"through the atomic executor, in the transaction that records the decision.")
	} else {
		lines = append(lines, st.Title.Render(fmt.Sprintf("Reject #%d", r.ID)),
			"The conflicting request will never run; its replays stay refused for ever.")
	}
	lines = append(lines, st.Label.Render("identity ")+r.Tenant+"/"+r.OperationID+st.Label.Render("  class ")+r.IncomingClass)
	lines = append(lines, view.Labelled("incoming hash", st.Label, st.HashIncoming.Render(r.IncomingHash), w, 2)...)
	return append(lines, "")
}

func (v *View) renderForm(w, h int) string {
	st := v.c.Styles
	lines := v.formHeader(w)
	field := func(i int, name string, in textinput.Model) {
		lbl := "  " + view.Pad(name, 18)
		if i == v.focus {
			lbl = st.Focused.Render("> " + view.Pad(name, 18))
		} else {
			lbl = st.Label.Render(lbl)
		}
		in.Width = max(10, w-22)
		lines = append(lines, lbl+in.View())
	}
	if v.action == decideAccept {
		field(0, "new operation id", v.newOp)
		field(1, "reason", v.reason)
	} else {
		field(0, "reason", v.reason)
	}
	lines = append(lines, "", st.Muted.Render("enter: review before deciding · tab: next field · esc: cancel"))
	return view.FitLines(view.WrapAll(lines, w), w, h)
}

func (v *View) renderConfirm(w, h int) string {
	st := v.c.Styles
	r := v.rec
	lines := []string{st.Warning.Render(fmt.Sprintf("Confirm: %s quarantine #%d", v.action.verb(), r.ID)), ""}
	row := func(k, val string) { lines = append(lines, st.Label.Render("  "+view.Pad(k, 18))+val) }
	row("identity", r.Tenant+"/"+r.OperationID)
	if v.action == decideAccept {
		row("runs as", r.Tenant+"/"+strings.TrimSpace(v.newOp.Value()))
		row("class", r.IncomingClass)
	}
	if v.c.Who != "" {
		row("decided by", v.c.Who) // who the database records, not the label
	}
	row("operator label", v.c.Operator)
	row("reason", strings.TrimSpace(v.reason.Value()))
	lines = append(lines, "", "This decision is final and is recorded in the audit log.")
	if v.mode == queueDeciding {
		lines = append(lines, "", st.StepRunning.Render("Recording the decision…"))
	} else {
		lines = append(lines, "", st.Focused.Render("y")+" confirm   "+st.Focused.Render("n/esc")+" back to the form")
	}
	return view.FitLines(view.WrapAll(lines, w), w, h)
}

// plural renders "1 record", "2 records".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
