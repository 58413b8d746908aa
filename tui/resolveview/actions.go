package resolveview

import (
	"errors"
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemctl/idemctl/recovery"
	"github.com/idemctl/idemctl/tui/view"
)

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
				r.summary = []string{"A real run would run its effect, whose own checks decide: applied (inbox row, effect and response in one transaction), or an error with nothing written."}
			case recovery.WouldRedrive:
				r.steps[3] = step(stepSkipped, text("dry run: a real run re-drives it through its class's service, then reads the primary"))
				r.steps[4] = step(stepSkipped, text("not needed"))
				r.summary = []string{"A real run would send it to its service with its own identity, whose own checks decide, and answer from the primary."}
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

func (v *View) renderConfirm(w, h int) string {
	st := v.c.Styles
	p := v.pending
	lines := []string{st.Warning.Render("Confirm a REAL run (dry run is off)"), ""}
	row := func(k, val string) { lines = append(lines, st.Label.Render("  "+view.Pad(k, 14))+val) }
	row("identity", p.TenantID+"/"+p.OperationID)
	row("class", p.Class)
	lines = append(lines, view.Labelled("  "+view.Pad("payload hash", 14), st.Label, st.HashIncoming.Render(p.Hash), w, 4)...)
	if v.c.Who != "" {
		row("run by", v.c.Who) // who the database records, not the label
	}
	row("operator", v.c.Operator)
	lines = append(lines, "",
		"If the identity is absent the operation executes now (its effect commits);",
		"if it exists with another payload the request is quarantined.",
		"", st.Focused.Render("y")+" run it   "+st.Focused.Render("n/esc")+" cancel")
	return view.FitLines(view.WrapAll(lines, w), w, h)
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
