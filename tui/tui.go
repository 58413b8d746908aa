// Package tui is idemctl's on-call console (`idemctl tui`): the quarantine
// queue with its evidence and decisions, the recovery protocol run step by
// step, the purge horizon with four-eyes approval, the audit log, the
// reconcile of the inbox with a settlement report, and the four-eyes plans
// (accept-as-new, record) with what each will run, to approve.
//
// It is a thin face over the same domain services as the CLI (quarantine,
// audit, recovery, horizon, reconcile), injected as interfaces. This package
// is the root model: it owns the views, routes messages, and draws the
// header, the tabs, the banner and the help line. Each view is a package of
// its own (queueview, resolveview, horizonview, auditview, reconcileview,
// approvalsview) with its service interface and its adapter over the domain;
// they share package view (the Context: size, styles, keymap, operator,
// database, clock; the banner; layout helpers; the list Loader), keys
// (every view's keymap) and styles. All I/O happens inside tea.Cmd closures
// that return typed messages, errors included.
package tui

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/idemctl/idemctl/tui/approvalsview"
	"github.com/idemctl/idemctl/tui/auditview"
	"github.com/idemctl/idemctl/tui/horizonview"
	"github.com/idemctl/idemctl/tui/keys"
	"github.com/idemctl/idemctl/tui/queueview"
	"github.com/idemctl/idemctl/tui/reconcileview"
	"github.com/idemctl/idemctl/tui/resolveview"
	"github.com/idemctl/idemctl/tui/styles"
	"github.com/idemctl/idemctl/tui/view"
)

// Defaults of Options.
const (
	DefaultRefresh   = 5 * time.Second
	DefaultStepDelay = 250 * time.Millisecond
	DefaultTimeout   = 30 * time.Second
	// MinWidth and MinHeight are the smallest usable terminal.
	MinWidth  = 60
	MinHeight = 16
)

// Options configure the console.
type Options struct {
	Services Services
	// Database is shown in the header; Operator (a label) is recorded with
	// every decision, and shown in the header when Who is unknown or there
	// is room.
	Operator string
	Database string
	// Who is the person the database records for this login, with the
	// login ("alice (pay_alice)"), shown in the header and where a decision
	// is confirmed.
	Who string
	// Now is the display clock; time.Now when nil.
	Now func() time.Time
	// Styles; styles.DefaultStyles() when zero.
	Styles *styles.Styles
	// Refresh is how often the queue reloads by itself; DefaultRefresh when
	// 0, never when negative.
	Refresh time.Duration
	// StepDelay is the pause between two protocol steps, so that a person
	// sees them happen one by one; DefaultStepDelay when 0, none when negative.
	StepDelay time.Duration
	// Timeout bounds each command's I/O; DefaultTimeout when 0.
	Timeout time.Duration
	// Context is the parent of every command's context.
	Context context.Context
	// Clipboard puts text on the terminal's clipboard; Run sets it to OSC 52
	// on its output.
	Clipboard func(string)
	// Problem, when set, is why the console cannot work on this database
	// (no schema idem, one of another version, a standby): it shows that,
	// with what to do, instead of views that would look empty.
	Problem string
}

// Tab is one of the views.
type Tab int

// The views, in tab order.
const (
	TabQueue Tab = iota
	TabResolve
	TabHorizon
	TabAudit
	TabReconcile
	TabApprovals
)

var tabNames = [...]string{"Queue", "Resolve", "Horizon", "Audit", "Reconcile", "Approvals"}

// Model is the root model: it owns the views, routes messages, and
// draws the header, the tabs, the banner and the help line around the
// active view.
type Model struct {
	ctx    *view.Context
	cancel context.CancelFunc
	views  [len(tabNames)]view.View
	active Tab
	help   help.Model
	full   bool // full help shown
	quit   bool
	// The banner last drawn and since when, for successTTL.
	banSeen  view.Banner
	banSince time.Time
	// problem replaces every view (Options.Problem).
	problem string

	queue     *queueview.View
	resolve   *resolveview.View
	horizon   *horizonview.View
	audit     *auditview.View
	reconcile *reconcileview.View
	approvals *approvalsview.View
}

// New builds the console. It does no I/O until the program runs it.
func New(o Options) *Model {
	if o.Now == nil {
		o.Now = time.Now
	}
	st := styles.DefaultStyles()
	if o.Styles != nil {
		st = *o.Styles
	}
	if o.Refresh == 0 {
		o.Refresh = DefaultRefresh
	}
	if o.StepDelay == 0 {
		o.StepDelay = DefaultStepDelay
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	parent := o.Context
	if parent == nil {
		parent = context.Background()
	}
	base, cancel := context.WithCancel(parent)
	c := &view.Context{
		Width: 80, Height: 24,
		Styles: st, Keys: keys.Default(),
		Operator: o.Operator, Database: o.Database, Who: o.Who,
		Now: o.Now, Base: base, Timeout: o.Timeout, Clipboard: o.Clipboard,
	}
	m := &Model{ctx: c, cancel: cancel, help: newHelp(st), problem: o.Problem}
	m.queue = queueview.New(c, o.Services.Quarantine, o.Refresh)
	m.resolve = resolveview.New(c, o.Services.Resolve, o.StepDelay)
	m.horizon = horizonview.New(c, o.Services.Horizon)
	m.audit = auditview.New(c, o.Services.Audit)
	m.reconcile = reconcileview.New(c, o.Services.Reconcile)
	m.approvals = approvalsview.New(c, o.Services.Approvals)
	m.views = [len(tabNames)]view.View{m.queue, m.resolve, m.horizon, m.audit, m.reconcile, m.approvals}
	return m
}

func newHelp(st styles.Styles) help.Model {
	h := help.New()
	h.Styles = help.Styles{
		Ellipsis: st.HelpSep, ShortKey: st.HelpKey, ShortDesc: st.HelpDesc, ShortSeparator: st.HelpSep,
		FullKey: st.HelpKey, FullDesc: st.HelpDesc, FullSeparator: st.HelpSep,
	}
	return h
}

// Active returns the active view.
func (m *Model) Active() Tab { return m.active }

// Context returns the shared context (tests read the size from it).
func (m *Model) Context() *view.Context { return m.ctx }

// Init loads the queue, the view the console opens on.
func (m *Model) Init() tea.Cmd {
	if m.problem != "" {
		return nil
	}
	return m.queue.Activate()
}

// Update routes a message: keys to the global keymap or the active view,
// everything else to every view (each ignores what is not its own).
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if m.quit {
		return m, nil
	}
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.ctx.Width, m.ctx.Height = msg.Width, msg.Height
		m.help.Width = msg.Width
		return m, m.broadcast(msg)
	case tea.KeyMsg:
		return m, m.key(msg)
	case view.OpenQuarantineMsg:
		m.active = TabQueue
		return m, m.queue.Open(msg.ID)
	}
	return m, m.broadcast(msg)
}

func (m *Model) broadcast(msg tea.Msg) tea.Cmd {
	var cmds []tea.Cmd
	for _, v := range m.views {
		cmds = append(cmds, v.Update(msg))
	}
	return tea.Batch(cmds...)
}

func (m *Model) key(msg tea.KeyMsg) tea.Cmd {
	g := m.ctx.Keys.Global
	v := m.views[m.active]
	if key.Matches(msg, g.ForceQuit) {
		return m.quitCmd()
	}
	if m.problem != "" {
		if key.Matches(msg, g.Quit) || key.Matches(msg, g.Back) {
			return m.quitCmd()
		}
		return nil
	}
	if m.full {
		switch {
		case key.Matches(msg, g.Help), key.Matches(msg, g.Back):
			m.full = false
		case key.Matches(msg, g.Quit):
			return m.quitCmd()
		}
		return nil
	}
	if v.Typing() {
		return v.Update(msg)
	}
	switch {
	case key.Matches(msg, g.Quit):
		return m.quitCmd()
	case key.Matches(msg, g.Help):
		m.full = true
		return nil
	case key.Matches(msg, g.Next):
		return m.switchTo((m.active + 1) % Tab(len(m.views)))
	case key.Matches(msg, g.Prev):
		return m.switchTo((m.active + Tab(len(m.views)) - 1) % Tab(len(m.views)))
	case key.Matches(msg, g.Back):
		_, cmd := v.Back()
		return cmd
	}
	for i, b := range g.Views {
		if key.Matches(msg, b) {
			return m.switchTo(Tab(i))
		}
	}
	return v.Update(msg)
}

func (m *Model) switchTo(t Tab) tea.Cmd {
	if t == m.active {
		return nil
	}
	m.active = t
	return m.views[t].Activate()
}

// quitCmd stops every command in flight and quits.
func (m *Model) quitCmd() tea.Cmd {
	m.quit = true
	m.cancel()
	return tea.Quit
}

// View draws the whole screen.
func (m *Model) View() string {
	if m.quit {
		return ""
	}
	c := m.ctx
	w, h := c.Width, c.Height
	st := c.Styles
	if w < MinWidth || h < MinHeight {
		return view.FitLines([]string{
			st.Header.Render("idemctl"),
			st.Warning.Render("terminal too small"),
			view.Sprintf("need %dx%d, have %dx%d", MinWidth, MinHeight, w, h),
			"resize, or press q to quit",
		}, w, h)
	}
	header := m.header(w)
	tabs := m.tabs(w)
	if m.problem != "" {
		return m.problemView(w)
	}
	v := m.views[m.active]
	bodyH := c.BodyHeight()
	ban := m.banner(m.shownBanner(v.Status()), w)
	if t, ok := v.(view.Tall); ok && t.Tall() && !m.full {
		// A reading view takes the banner's unused lines: the banner keeps
		// only the lines it has, and the help line stays at the bottom.
		lines := strings.Split(ban, "\n")
		for len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		bodyH += view.BannerLines - len(lines)
		ban = strings.Join(lines, "\n")
	}
	var body string
	if m.full {
		body = m.fullHelp(w, bodyH)
	} else {
		body = view.FitLines(strings.Split(v.Render(w, bodyH), "\n"), w, bodyH)
	}
	parts := []string{header, tabs, body}
	if ban != "" || bodyH == c.BodyHeight() {
		parts = append(parts, ban)
	}
	km := keys.Combined{View: v.KeyMap(), Global: c.Keys.Global, Typing: v.Typing()}
	if m.full {
		km = keys.Combined{View: keys.Bindings{Short: []key.Binding{c.Keys.Global.Back}}, Global: c.Keys.Global}
	}
	return strings.Join(append(parts, m.helpLine(km, w)), "\n")
}

// helpLine is the footer: the global keys (? help, q quit) always show; the
// view's keys fill what is left, dropped from the end when they do not fit.
func (m *Model) helpLine(km keys.Combined, w int) string {
	hm := m.help
	hm.Width = 0
	all := km.ShortHelp()
	nView := len(km.View.ShortHelp())
	global := all[nView:]
	for n := nView; n >= 0; n-- {
		line := hm.ShortHelpView(append(append([]key.Binding{}, all[:n]...), global...))
		if lipgloss.Width(line) <= w {
			return line
		}
	}
	return view.Trunc(hm.ShortHelpView(global), w)
}

// problemView is the whole screen when the console cannot work on the
// database: the header (which database), the problem and how to leave.
func (m *Model) problemView(w int) string {
	c := m.ctx
	body := []string{"", c.Styles.Error.Render("idemctl cannot work on this database.")}
	for _, l := range view.Wrap("error: "+m.problem, w) {
		body = append(body, c.Styles.Error.Render(l))
	}
	body = append(body, "", "Nothing was read or written. Fix it, then start idemctl tui again.")
	return strings.Join([]string{m.header(w), "", view.FitLines(body, w, c.Height-view.HeaderLines-view.HelpLines),
		view.Trunc("q quit", w)}, "\n")
}

// header names the console, the person the database records for the
// session's login (with the login, as the confirmations do; the --operator
// label only when there is room, and alone only when the person is unknown)
// and the database. The database's identity is what tells a primary from a
// look-alike, so it is never cut: the other parts shorten, then go, first
// (only an identity wider than the terminal itself is shortened, in the
// middle); the person goes only after every label.
func (m *Model) header(w int) string {
	st := m.ctx.Styles
	db, op, who := m.ctx.Database, m.ctx.Operator, m.ctx.Who
	dbPart := st.HeaderKey.Render("db ") + db
	var variants []string
	if who != "" {
		as := st.HeaderKey.Render("as ") + who
		variants = []string{
			st.Header.Render("idemctl tui") + "  " + as + "  " + st.HeaderKey.Render("operator ") + op + "  " + dbPart,
			st.Header.Render("idemctl tui") + "  " + as + "  " + dbPart,
			st.Header.Render("idemctl") + "  " + as + "  " + dbPart,
			as + "  " + dbPart,
			as + "  " + db,
		}
	} else {
		variants = []string{
			st.Header.Render("idemctl tui") + "  " + st.HeaderKey.Render("operator ") + op + "  " + dbPart,
			st.Header.Render("idemctl") + "  " + st.HeaderKey.Render("operator ") + op + "  " + dbPart,
			st.Header.Render("idemctl") + "  " + st.HeaderKey.Render("op ") + op + "  " + dbPart,
			st.HeaderKey.Render("op ") + op + "  " + dbPart,
		}
	}
	for _, h := range append(variants, dbPart, db) {
		if lipgloss.Width(h) <= w {
			return h
		}
	}
	return view.TruncMiddle(db, w)
}

func (m *Model) tabs(w int) string {
	st := m.ctx.Styles
	parts := make([]string, len(tabNames))
	for i, name := range tabNames {
		label := view.Sprintf("%d %s", i+1, name)
		if Tab(i) == m.active {
			parts[i] = st.ActiveTab.Render("[" + label + "]")
		} else {
			parts[i] = st.Tab.Render(" " + label + " ")
		}
	}
	return view.Trunc(strings.Join(parts, " "), w)
}

// successTTL is how long an "ok:" banner stays: long enough to read, not so
// long that it describes a screen that has moved on.
const successTTL = 20 * time.Second

// shownBanner is the banner to draw: a success fades after successTTL, and
// while the database is unreachable a disconnected line comes first.
func (m *Model) shownBanner(b view.Banner) view.Banner {
	now := m.ctx.Now()
	if b != m.banSeen {
		m.banSeen, m.banSince = b, now
	}
	if b.Kind == view.BannerSuccess && now.Sub(m.banSince) > successTTL {
		b = view.Banner{}
	}
	if m.ctx.Disconnected {
		text := "disconnected: the database is unreachable; the queue retries on each refresh (r now)"
		if b.Kind != view.BannerNone {
			text += " · " + b.Text
		}
		b = view.Banner{Kind: view.BannerWarning, Text: text}
	}
	return b
}

// banner renders the view's message on view.BannerLines lines (wrapped, then cut).
func (m *Model) banner(b view.Banner, w int) string {
	st := m.ctx.Styles
	var prefix string
	var style lipgloss.Style
	switch b.Kind {
	case view.BannerNone:
		return strings.Repeat("\n", view.BannerLines-1)
	case view.BannerInfo:
		style = st.Info
	case view.BannerSuccess:
		prefix, style = "ok: ", st.Success
	case view.BannerWarning:
		prefix, style = "warning: ", st.Warning
	case view.BannerError:
		prefix, style = "error: ", st.Error
	}
	lines := view.Wrap(prefix+b.Text, w)
	if len(lines) > view.BannerLines {
		lines = lines[:view.BannerLines]
		lines[view.BannerLines-1] = view.Trunc(lines[view.BannerLines-1], w-1) + "…"
	}
	for i := range lines {
		lines[i] = style.Render(lines[i])
	}
	for len(lines) < view.BannerLines {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

func (m *Model) fullHelp(w, h int) string {
	st := m.ctx.Styles
	v := m.views[m.active]
	km := keys.Combined{View: v.KeyMap(), Global: m.ctx.Keys.Global}
	m.help.Width = w
	lines := []string{st.Title.Render("Keys: " + tabNames[m.active]), ""}
	// The help component puts every group side by side and cuts what does
	// not fit: lay the groups out in as many rows as the width needs.
	hm := m.help
	hm.Width = 0
	var row [][]key.Binding
	rowW := 0
	flush := func() {
		if len(row) > 0 {
			lines = append(lines, strings.Split(hm.FullHelpView(row), "\n")...)
			lines = append(lines, "")
		}
		row, rowW = nil, 0
	}
	for _, g := range km.FullHelp() {
		gw := lipgloss.Width(hm.FullHelpView([][]key.Binding{g}))
		if rowW > 0 && rowW+4+gw > w {
			flush()
		}
		if rowW > 0 {
			rowW += 4
		}
		row, rowW = append(row, g), rowW+gw
	}
	flush()
	lines = append(lines, "", st.Muted.Render("? or esc closes this help"))
	return view.FitLines(lines, w, h)
}

// darkBackground says whether the terminal's background is dark without
// asking the terminal: termenv's question waits 5 s (a constant) on a
// terminal that does not answer, and an answer arriving once the program
// reads the terminal would be read as keys. It reads COLORFGBG, as termenv
// does when no answer comes (a writer that is no terminal is never asked);
// without it, dark. The console's own styles use no adaptive colour; only
// bubbles' built-in ones (help, inputs) do. The binary never asks at start
// either (internal/termquiet).
func darkBackground() bool {
	return termenv.NewOutput(io.Discard).HasDarkBackground()
}

// Run runs the console on a terminal until the operator quits. With noColor
// (NO_COLOR) nothing is coloured, in the console's own styles and in the
// components'.
func Run(ctx context.Context, in io.Reader, out io.Writer, o Options, noColor bool) error {
	st := styles.ForOutput(out, noColor)
	if noColor {
		// bubbles components with built-in styles render on the default
		// renderer.
		lipgloss.SetColorProfile(termenv.Ascii)
	} else {
		lipgloss.SetHasDarkBackground(darkBackground())
	}
	o.Styles = &st
	o.Context = ctx
	if o.Clipboard == nil {
		osc := termenv.NewOutput(out)
		o.Clipboard = func(s string) { osc.Copy(s) }
	}
	m := New(o)
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out), tea.WithAltScreen())
	_, err := p.Run()
	m.cancel()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
