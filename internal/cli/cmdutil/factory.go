// Package cmdutil is what every command package shares: the Factory (streams,
// global flags, lazily opened database handles and the preflight), exit codes
// and each command's database need, tables and JSON lines, progress, and the
// confirmation of commands that change something.
package cmdutil

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/textfit"
	"github.com/idemctl/idemctl/recovery"
)

// Factory holds what commands share: streams, global flags and lazily opened
// database handles, so that a command that never touches the database never
// connects.
type Factory struct {
	IO *IOStreams
	// DSNFlag is --dsn; empty means IDEMCTL_DSN, DATABASE_URL, then PG*.
	DSNFlag string
	// Output is -o: "auto" (table on a terminal, json otherwise), "table"
	// (fitted to the terminal), "wide" (every cell whole) or "json".
	Output string
	// NoHeaders is --no-headers: tables without their header row.
	NoHeaders bool
	// OperatorFlag is --operator.
	OperatorFlag string
	// Now is the operator's clock, only for display; decisions use the database clock.
	Now func() time.Time

	// need is what the running command needs of the database (its
	// policy); state is what the first connection found.
	need  DBNeed
	state *DBState

	pool *pgxpool.Pool
}

// NewFactory returns a Factory over the given streams.
func NewFactory(io *IOStreams) *Factory {
	return &Factory{IO: io, Output: "auto", Now: time.Now}
}

// DSN returns the DSN in force.
func (f *Factory) DSN() string {
	dsn, _ := db.ResolveDSN(f.DSNFlag)
	return dsn
}

// Pool opens (once) the shared connection pool.
func (f *Factory) Pool(ctx context.Context) (*pgxpool.Pool, error) {
	if f.pool != nil {
		return f.pool, nil
	}
	pool, err := f.OpenPool(ctx, db.Options{})
	if err != nil {
		return nil, err
	}
	f.pool = pool
	return pool, nil
}

// OpenPool opens a pool of its own (the caller closes it), after the
// command's preflight.
func (f *Factory) OpenPool(ctx context.Context, o db.Options) (*pgxpool.Pool, error) {
	if err := db.CheckTarget(f.DSN()); err != nil {
		return nil, WithCode(ExitUsage, err)
	}
	pool, err := db.Open(ctx, f.DSN(), o)
	if err != nil {
		return nil, err
	}
	if err := f.preflight(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// Conn opens a dedicated connection, after the command's preflight; the
// caller closes it.
func (f *Factory) Conn(ctx context.Context) (*pgx.Conn, error) {
	if err := db.CheckTarget(f.DSN()); err != nil {
		return nil, WithCode(ExitUsage, err)
	}
	conn, err := db.Connect(ctx, f.DSN(), db.Options{})
	if err != nil {
		return nil, err
	}
	if err := f.preflight(ctx, conn); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// preflight checks, once per command, that the database reached is one the
// command can use (DBNeed), and on a terminal names it on stderr.
func (f *Factory) preflight(ctx context.Context, q recovery.RowQuerier) error {
	if f.state == nil {
		st, err := probeDB(ctx, q, f.DescribeDB())
		if err != nil {
			return err
		}
		f.state = &st
		if f.need >= NeedSchema && f.IO.IsStderrTTY() {
			fmt.Fprintln(f.IO.ErrOut, textfit.Sentence(st.headerLine(), f.IO.TextWidth()))
		}
	}
	return f.state.Check(f.need)
}

// SetNeed sets what the running command needs of the database (its policy).
func (f *Factory) SetNeed(need DBNeed) { f.need = need }

// State is where the database stands, as the command's preflight found it
// (nil before the first connection).
func (f *Factory) State() *DBState { return f.state }

// Close releases the pool.
func (f *Factory) Close() {
	if f.pool != nil {
		f.pool.Close()
		f.pool = nil
	}
}

// JSON reports whether output is machine JSON (one object per line).
func (f *Factory) JSON() bool {
	switch f.Output {
	case "json":
		return true
	case "table", "wide":
		return false
	default:
		return !f.IO.IsStdoutTTY()
	}
}

// Operator is who runs the command: --operator, else IDEMCTL_OPERATOR, else the
// OS user.
func (f *Factory) Operator() string {
	if f.OperatorFlag != "" {
		return f.OperatorFlag
	}
	if v := os.Getenv("IDEMCTL_OPERATOR"); v != "" {
		return v
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown"
}

// ValidateOperator checks the operator label given (--operator, or
// IDEMCTL_OPERATOR) by the database's rules for an actor, before any
// command runs: a bad one is a usage error naming where it came from, the
// same for every command (resolve blamed the audit's "actor" with exit 1,
// reject and horizon plan exited 5).
func (f *Factory) ValidateOperator() error {
	what, v := "--operator", f.OperatorFlag
	if v == "" {
		what, v = "IDEMCTL_OPERATOR", os.Getenv("IDEMCTL_OPERATOR")
	}
	if v == "" {
		return nil
	}
	if err := idem.CheckText(what, v, audit.MaxActorBytes); err != nil {
		return UsageErr("%v", err)
	}
	return nil
}

// ValidateOutput checks -o for cmd (prometheus is for status only) and sets
// the table layout of standard output and standard error.
func (f *Factory) ValidateOutput(cmd *cobra.Command) error {
	switch f.Output {
	case "auto", "table", "wide", "json":
		f.setLayout()
		return nil
	case "prometheus":
		if CommandKey(cmd) == "status" {
			return nil
		}
		return UsageErr("-o prometheus is for idemctl status only; use table, wide or json")
	}
	return UsageErr("invalid --output %q: use table, wide or json", f.Output)
}

// setLayout makes standard output and standard error (bulk previews, run
// reports) carry the table layout of -o and --no-headers.
func (f *Factory) setLayout() {
	l := TableLayout{Width: f.IO.width, NoHeaders: f.NoHeaders}
	le := TableLayout{Width: f.IO.errWidth}
	if f.Output == "wide" {
		l.Width, le.Width = 0, 0
	}
	f.IO.Out = withLayout(f.IO.Out, l)
	f.IO.ErrOut = withLayout(f.IO.ErrOut, le)
}

// withLayout returns w carrying layout l.
func withLayout(w io.Writer, l TableLayout) io.Writer {
	if lw, ok := w.(*LayoutWriter); ok {
		lw.Layout = l
		return lw
	}
	return &LayoutWriter{Writer: w, Layout: l}
}

// DescribeDB names the database in use for messages, without the password.
func (f *Factory) DescribeDB() string {
	return db.Describe(f.DSN())
}
