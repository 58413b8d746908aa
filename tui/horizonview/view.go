// Package horizonview is the console's purge horizon: the replay sources
// with their last probe, the purge plans, the four-eyes approval and the
// purge itself with its progress.
package horizonview

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/progress"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/tui/keys"
	"github.com/idemctl/idemctl/tui/view"
)

// HorizonService is what the horizon view needs: the replay sources with
// their last probe, the purge plans, the four-eyes approval and the purge
// itself. An adapter over package horizon implements it.
type HorizonService interface {
	// Sources lists every replay source and its last probe.
	Sources(ctx context.Context) ([]HorizonSource, error)
	// Plans lists the purge plans, newest first.
	Plans(ctx context.Context) ([]PurgePlan, error)
	// Approve approves a planned purge. It returns an error wrapping
	// ErrSameOperator when operator planned it (four eyes).
	Approve(ctx context.Context, planID int64, operator string) error
	// Purge executes an approved plan, calling progress as it goes (from the
	// purging goroutine). A plan stopped because the horizon moved is not an
	// error: the result says Aborted and why.
	Purge(ctx context.Context, planID int64, operator string, progress func(done, total int64)) (PurgeResult, error)
}

// ErrSameOperator is the four-eyes refusal: the person who planned a purge
// cannot approve it.
var ErrSameOperator = errors.New("four eyes: the person who planned a purge cannot approve it")

// HorizonSource is one place that could still replay operations.
type HorizonSource struct {
	Name string
	// Kind is topic, dlq, archive, manual, ...
	Kind string
	// ProbedAt is when it was last probed; zero when never.
	ProbedAt time.Time
	// Result is the last probe's verdict, e.g. closed, open, unreachable.
	Result string
	// Proven is true when the probe proves the source cannot replay before
	// the horizon (an unreachable source is not proven: fail closed).
	Proven bool
	// Detail says what the probe found.
	Detail string
}

// PlanState is where a purge plan stands.
type PlanState string

// Plan states.
const (
	PlanPlanned  PlanState = "planned"
	PlanApproved PlanState = "approved"
	PlanPurging  PlanState = "purging"
	PlanDone     PlanState = "done"
	PlanAborted  PlanState = "aborted"
)

// PurgePlan is a proposal to purge inbox identities older than a horizon.
type PurgePlan struct {
	ID int64
	// Scope names what the plan covers (tenant, class).
	Scope string
	// Before is the horizon: identities older than it are purged.
	Before time.Time
	State  PlanState
	// Identities is how many inbox rows the plan covers; Purged how many
	// it removed so far.
	Identities int64
	Purged     int64
	// PlannedBy, ApprovedBy and RanBy are who planned, approved and ran
	// the purge: persons, with their logins (zero: not yet).
	PlannedBy  Who
	PlannedAt  time.Time
	ApprovedBy Who
	RanBy      Who
	// Contract is the business contract reference cited (money operations).
	Contract string
	// Proof is the plan's evidence, one line a source: what each probe found.
	Proof []string
	// HeldBack says which of the covered identities the purge leaves, and
	// who holds them back, adding up to the total: "5: quarantine 4 (open or
	// rejected records), manual 1"; "" when nothing does.
	HeldBack string
	// AbortReason says why an aborted plan stopped.
	AbortReason string
}

// Who is a person with the login they acted through: four eyes compare
// persons, and the console shows both, as the CLI does (audit.Who).
type Who struct {
	Person string
	Login  string
}

// String is "alice (op1)", "(no person) op1", or "-" for nobody yet.
func (w Who) String() string { return audit.Who(w.Person, w.Login) }

func (w Who) zero() bool { return w.Person == "" && w.Login == "" }

// PurgeResult is what a purge did.
type PurgeResult struct {
	Purged      int64
	Aborted     bool
	AbortReason string
}

// listing is what one load of the view reads.
type listing struct {
	sources []HorizonSource
	plans   []PurgePlan
}

// Messages of the horizon view.
type (
	approvedMsg struct {
		id  int64
		err error
	}
	purgeProgressMsg struct {
		id          int64
		done, total int64
	}
	purgeDoneMsg struct {
		id     int64
		result PurgeResult
		err    error
	}
)

type horizonAction int

const (
	horizonApprove horizonAction = iota + 1
	horizonPurge
)

// View is the purge horizon view; the root model owns it and routes messages to it.
type View struct {
	c   *view.Context
	svc HorizonService

	sources []HorizonSource
	plans   []PurgePlan
	list    view.Loader[listing]
	nav     view.ListNav
	ban     view.Banner

	confirm horizonAction
	busy    bool // an approval is on its way

	purgeID     int64
	purgeDone   int64
	purgeTotal  int64
	purgeEvents chan tea.Msg
	bar         progress.Model
}

// New returns the purge horizon view over its service (nil: the view says it is not
// available); it does no I/O until activated.
func New(c *view.Context, svc HorizonService) *View {
	bar := progress.New(progress.WithSolidFill(c.Styles.ProgressFull), progress.WithColorProfile(c.Styles.Profile()),
		progress.WithFillCharacters('#', '.'))
	bar.EmptyColor = c.Styles.ProgressEmpty
	return &View{c: c, svc: svc, bar: bar, list: view.NewLoader[listing](c)}
}

// Activate implements view.View.
func (v *View) Activate() tea.Cmd {
	if v.svc == nil {
		v.ban = view.WarningBanner("the horizon service is not wired into this build (package horizon)")
		return nil
	}
	return v.load()
}

func (v *View) load() tea.Cmd {
	if v.svc == nil {
		return nil
	}
	svc := v.svc
	return v.list.Load("", func(ctx context.Context) (listing, error) {
		sources, err := svc.Sources(ctx)
		if err != nil {
			return listing{}, fmt.Errorf("load the replay sources: %w", err)
		}
		plans, err := svc.Plans(ctx)
		if err != nil {
			return listing{}, fmt.Errorf("load the purge plans: %w", err)
		}
		return listing{sources: sources, plans: plans}, nil
	})
}

// Typing implements view.View.
func (v *View) Typing() bool { return false }

// Status implements view.View.
func (v *View) Status() view.Banner { return v.ban }

// Back implements view.View.
func (v *View) Back() (bool, tea.Cmd) {
	if v.confirm != 0 {
		v.confirm = 0
		v.ban = view.InfoBanner("cancelled: nothing changed")
		return true, nil
	}
	return false, nil
}

func (v *View) purging() bool { return v.purgeEvents != nil }

// SetPurging marks plan id as being purged, or no longer, as a purge in
// flight does, without running one (the console's own tests draw it).
func (v *View) SetPurging(id int64, running bool) {
	v.purgeID, v.purgeEvents = id, nil
	if running {
		v.purgeEvents = make(chan tea.Msg)
	}
}

// sourceRows is how many source rows fit; the plans get the rest.
func (v *View) sourceRows() int {
	body := v.c.BodyHeight()
	return max(1, min(max(1, len(v.sources)), (body-9)/2))
}

func (v *View) planRows() int {
	return max(1, v.c.BodyHeight()-6-v.sourceRows()-len(v.footer(v.c.Width)))
}

func (v *View) selected() *PurgePlan { return view.At(v.plans, v.nav.Cursor) }

// Update implements view.View.
func (v *View) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case view.Loaded[listing]:
		l, ok := v.list.Arrived(msg, &v.ban)
		if !ok {
			return nil
		}
		old := v.plans
		v.sources, v.plans = l.sources, l.plans
		view.Reselect(&v.nav, old, v.plans, func(p PurgePlan) int64 { return p.ID }, v.planRows())
	case approvedMsg:
		v.busy = false
		if msg.err != nil {
			if errors.Is(msg.err, ErrSameOperator) {
				v.ban = view.Banner{Kind: view.BannerError, Text: fmt.Sprintf("refused: you planned purge #%d; another person must approve it", msg.id)}
			} else {
				v.ban = view.ErrorBanner(fmt.Errorf("approve plan #%d: %w", msg.id, msg.err))
			}
			return v.load()
		}
		// Who approved is the person behind this login: the plan, reloaded,
		// names them with the login (an --operator label proves nothing).
		v.ban = view.SuccessBanner("plan #%d approved; it can now be purged (p)", msg.id)
		return v.load()
	case purgeProgressMsg:
		if msg.id == v.purgeID {
			v.purgeDone, v.purgeTotal = msg.done, msg.total
		}
		return v.waitPurge()
	case purgeDoneMsg:
		v.purgeEvents = nil
		switch {
		case msg.err != nil:
			v.ban = view.ErrorBanner(fmt.Errorf("purge plan #%d: %w", msg.id, msg.err))
		case msg.result.Aborted:
			v.ban = view.WarningBanner("purge #%d aborted after %d identities: %s", msg.id, msg.result.Purged, msg.result.AbortReason)
		default:
			v.purgeDone = msg.result.Purged
			v.ban = view.SuccessBanner("purge #%d done: %d identities purged", msg.id, msg.result.Purged)
		}
		return v.load()
	case tea.KeyMsg:
		return v.key(msg)
	}
	return nil
}

func (v *View) key(msg tea.KeyMsg) tea.Cmd {
	if v.svc == nil {
		return nil
	}
	k := v.c.Keys.Horizon
	if v.confirm != 0 {
		switch {
		case key.Matches(msg, v.c.Keys.Confirm.Yes):
			a := v.confirm
			v.confirm = 0
			if a == horizonApprove {
				return v.approve()
			}
			return v.startPurge()
		case key.Matches(msg, v.c.Keys.Confirm.No):
			v.confirm = 0
			v.ban = view.InfoBanner("cancelled: nothing changed")
		}
		return nil
	}
	if v.nav.Handle(k.List, msg, len(v.plans), v.planRows()) {
		return nil
	}
	p := v.selected()
	switch {
	case key.Matches(msg, k.Refresh):
		return v.load()
	case key.Matches(msg, k.Approve):
		switch {
		case p == nil || v.busy || v.purging():
		case p.State != PlanPlanned:
			v.ban = view.WarningBanner("plan #%d is %s: only a planned purge can be approved", p.ID, p.State)
		default:
			v.confirm, v.ban = horizonApprove, view.Banner{}
		}
	case key.Matches(msg, k.Purge):
		switch {
		case p == nil || v.busy:
		case v.purging():
			v.ban = view.InfoBanner("purge #%d is running", v.purgeID)
		case p.State != PlanApproved:
			v.ban = view.WarningBanner("plan #%d is %s: only an approved plan can be purged", p.ID, p.State)
		default:
			v.confirm, v.ban = horizonPurge, view.Banner{}
		}
	}
	return nil
}

func (v *View) approve() tea.Cmd {
	p := v.selected()
	if p == nil {
		return nil
	}
	v.busy = true
	id, svc, op := p.ID, v.svc, v.c.Operator
	return func() tea.Msg {
		ctx, cancel := v.c.CmdContext()
		defer cancel()
		return approvedMsg{id: id, err: svc.Approve(ctx, id, op)}
	}
}

// startPurge runs the purge in a goroutine started by the command; progress
// and the end come back through a channel that waitPurge reads one message
// at a time. The purge is not bounded by the per-command timeout, only by the
// program's life.
func (v *View) startPurge() tea.Cmd {
	p := v.selected()
	if p == nil {
		return nil
	}
	id, svc, op := p.ID, v.svc, v.c.Operator
	events := make(chan tea.Msg, 16)
	v.purgeID, v.purgeDone, v.purgeTotal, v.purgeEvents = id, 0, p.Identities, events
	start := func() tea.Msg {
		go func() {
			res, err := svc.Purge(v.c.Base, id, op, func(done, total int64) {
				select {
				case events <- purgeProgressMsg{id: id, done: done, total: total}:
				default: // the view is behind: skip this update, a later one follows
				}
			})
			select {
			case events <- purgeDoneMsg{id: id, result: res, err: err}:
			case <-v.c.Base.Done(): // the program quit; nobody reads any more
			}
		}()
		return <-events
	}
	return start
}

func (v *View) waitPurge() tea.Cmd {
	events := v.purgeEvents
	if events == nil {
		return nil
	}
	return func() tea.Msg { return <-events }
}

// KeyMap implements view.View.
func (v *View) KeyMap() help.KeyMap {
	k := v.c.Keys.Horizon
	switch {
	case v.svc == nil:
		return keys.Bindings{}
	case v.confirm != 0:
		return keys.Bindings{Short: []key.Binding{v.c.Keys.Confirm.Yes, v.c.Keys.Confirm.No}}
	}
	return keys.Bindings{
		Short: []key.Binding{k.Approve, k.Purge, k.Refresh, k.Down},
		Full:  [][]key.Binding{{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom}, {k.Approve, k.Purge, k.Refresh}},
	}
}
