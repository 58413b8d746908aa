package tui

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

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
	// Disconnected is true while the database is unreachable (the queue's
	// loads, every refresh, find out); the root shows a banner.
	Disconnected bool
}

// unreachable reports whether err says the database could not be reached
// (refused, reset, timed out, the connection lost), as opposed to a refusal
// by the database.
func unreachable(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Screen layout: the header and the tabs above the body; the banner (up to
// bannerLines) and the help line below it.
const (
	headerLines = 2
	bannerLines = 3
	helpLines   = 1
)

// bodyHeight is the height every view draws in.
func (c *Context) bodyHeight() int { return c.Height - headerLines - bannerLines - helpLines }

// cmdContext is the context of one tea.Cmd's I/O.
func (c *Context) cmdContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Base, c.Timeout)
}

// bannerKind says how a banner reads.
type bannerKind int

const (
	bannerNone bannerKind = iota
	bannerInfo
	bannerSuccess
	bannerWarning
	bannerError
)

// banner is a view's one message to the operator: the result of the last
// action, or the error that stopped it. Errors never crash the view; they end
// up here.
type banner struct {
	kind bannerKind
	text string
}

func infoBanner(format string, args ...any) banner {
	return banner{bannerInfo, sprintf(format, args...)}
}

func successBanner(format string, args ...any) banner {
	return banner{bannerSuccess, sprintf(format, args...)}
}

func warningBanner(format string, args ...any) banner {
	return banner{bannerWarning, sprintf(format, args...)}
}

func errorBanner(err error) banner {
	return banner{bannerError, term.Escape(oneLine(err.Error()))}
}
