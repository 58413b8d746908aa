package view

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemctl/idemctl/internal/term"
	"github.com/idemctl/idemctl/tui/keys"
	"github.com/idemctl/idemctl/tui/styles"
)

// Context is what every view shares: the terminal size, styles, keymap, who
// is operating on which database, the clock, and the context under which
// every tea.Cmd does its I/O. The root model owns it and updates it (size);
// views read it when they render.
type Context struct {
	Width, Height int
	Styles        styles.Styles
	Keys          keys.KeyMap
	// Operator is recorded with every decision (--operator, IDEMCTL_OPERATOR,
	// else the OS user).
	Operator string
	// Who is the person the database records for the session's login, with
	// the login (audit.Who); empty when unknown.
	Who string
	// Database describes the database without its password (db.Describe).
	Database string
	// Now is the display clock (relative times); decisions use the database's.
	Now func() time.Time
	// Base is cancelled when the program quits: in-flight commands stop.
	Base context.Context
	// Timeout bounds each command's I/O.
	Timeout time.Duration
	// Clipboard puts text on the terminal's clipboard (OSC 52); nil when
	// there is none.
	Clipboard func(string)
	// Disconnected is true while the database is Unreachable (the queue's
	// loads, every refresh, find out); the root shows a banner.
	Disconnected bool
}

// Decider is who a decision is recorded for: the person with the login
// (Who), or the --operator label when the person is unknown.
func (c *Context) Decider() string {
	if c.Who != "" {
		return c.Who
	}
	return c.Operator
}

// Unreachable reports whether err says the database could not be reached
// (refused, reset, timed out, the connection lost), as opposed to a refusal
// by the database.
func Unreachable(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Screen layout: the header and the tabs above the body; the banner (up to
// BannerLines) and the help line below it.
const (
	HeaderLines = 2
	BannerLines = 3
	HelpLines   = 1
)

// BodyHeight is the height every view draws in.
func (c *Context) BodyHeight() int { return c.Height - HeaderLines - BannerLines - HelpLines }

// CmdContext is the context of one tea.Cmd's I/O.
func (c *Context) CmdContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Base, c.Timeout)
}

// BannerKind says how a Banner reads.
type BannerKind int

const (
	BannerNone BannerKind = iota
	BannerInfo
	BannerSuccess
	BannerWarning
	BannerError
)

// Banner is a view's one message to the operator: the result of the last
// action, or the error that stopped it. Errors never crash the view; they end
// up here.
type Banner struct {
	Kind BannerKind
	Text string
}

// InfoBanner is a banner of kind BannerInfo.
func InfoBanner(format string, args ...any) Banner {
	return Banner{Kind: BannerInfo, Text: Sprintf(format, args...)}
}

// SuccessBanner is a banner of kind BannerSuccess.
func SuccessBanner(format string, args ...any) Banner {
	return Banner{Kind: BannerSuccess, Text: Sprintf(format, args...)}
}

// WarningBanner is a banner of kind BannerWarning.
func WarningBanner(format string, args ...any) Banner {
	return Banner{Kind: BannerWarning, Text: Sprintf(format, args...)}
}

// ErrorBanner is err as an error banner, on one line, escaped.
func ErrorBanner(err error) Banner {
	return Banner{Kind: BannerError, Text: term.Escape(OneLine(err.Error()))}
}

// Answer handles a key while a view asks yes or no before it acts: yes stops
// asking and returns act(); no stops asking and says in *ban what was
// cancelled ("cancelled: nothing ran"); any other key waits for an answer.
func (c *Context) Answer(msg tea.KeyMsg, asking *bool, ban *Banner, cancelled string, act func() tea.Cmd) tea.Cmd {
	switch {
	case key.Matches(msg, c.Keys.Confirm.Yes):
		*asking = false
		return act()
	case key.Matches(msg, c.Keys.Confirm.No):
		*asking = false
		*ban = Banner{Kind: BannerInfo, Text: cancelled}
	}
	return nil
}
