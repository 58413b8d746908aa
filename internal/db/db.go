// Package db opens idemctl's connections to PostgreSQL: where the DSN comes
// from, the session settings every idemctl connection carries, and how a DSN is
// shown without its password.
package db

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Session defaults. A statement that runs longer than this on a busy primary is
// a bug or a lock queue; an idle open transaction holds locks for nothing.
const (
	ApplicationName         = "idemctl"
	DefaultStatementTimeout = 60 * time.Second
	DefaultIdleInTxTimeout  = 60 * time.Second
	DefaultConnectTimeout   = 10 * time.Second
	defaultMaxConns         = 8
	redactedPassword        = "xxxxx"
)

// ErrConnect wraps every failure to reach the database.
var ErrConnect = errors.New("cannot connect to PostgreSQL")

// Source says where a DSN came from, for messages.
type Source string

// ResolveDSN picks the DSN: the --dsn flag, else IDEMCTL_DSN, else DATABASE_URL,
// else "" (libpq's PG* environment variables and defaults).
func ResolveDSN(flag string) (string, Source) {
	if flag != "" {
		return flag, "--dsn"
	}
	for _, env := range []string{"IDEMCTL_DSN", "DATABASE_URL"} {
		if v := os.Getenv(env); v != "" {
			return v, Source(env)
		}
	}
	return "", "PG* environment"
}

// Options tune a pool.
type Options struct {
	StatementTimeout time.Duration
	IdleInTxTimeout  time.Duration
	MaxConns         int32
}

// Config parses dsn into a pool config carrying idemctl's session settings.
// application_name is only set when the DSN does not choose one.
func Config(dsn string, o Options) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("invalid DSN %s: %s", Redact(dsn), Scrub(dsn, err.Error()))
	}
	rp := cfg.ConnConfig.RuntimeParams
	if _, ok := rp["application_name"]; !ok {
		rp["application_name"] = ApplicationName
	}
	if o.StatementTimeout == 0 {
		o.StatementTimeout = DefaultStatementTimeout
	}
	if o.IdleInTxTimeout == 0 {
		o.IdleInTxTimeout = DefaultIdleInTxTimeout
	}
	if _, ok := rp["statement_timeout"]; !ok {
		rp["statement_timeout"] = fmt.Sprint(o.StatementTimeout.Milliseconds())
	}
	if _, ok := rp["idle_in_transaction_session_timeout"]; !ok {
		rp["idle_in_transaction_session_timeout"] = fmt.Sprint(o.IdleInTxTimeout.Milliseconds())
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	} else if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = defaultMaxConns
	}
	return cfg, nil
}

// Open connects a pool and checks that the server answers.
func Open(ctx context.Context, dsn string, o Options) (*pgxpool.Pool, error) {
	cfg, err := Config(dsn, o)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, connectError(dsn, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, connectError(dsn, err)
	}
	return pool, nil
}

// Connect opens a single connection (migrations, advisory locks, demo init).
func Connect(ctx context.Context, dsn string, o Options) (*pgx.Conn, error) {
	cfg, err := Config(dsn, o)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return nil, connectError(dsn, err)
	}
	return conn, nil
}

func connectError(dsn string, err error) error {
	return fmt.Errorf("%w at %s: %s (check --dsn, IDEMCTL_DSN or DATABASE_URL, and that the server is up)",
		ErrConnect, Describe(dsn), oneLine(Scrub(dsn, err.Error())))
}

// oneLine folds pgx's multi-line connect errors (one line per host and TLS
// attempt) into one line, without repeats.
func oneLine(msg string) string {
	var parts []string
	seen := map[string]bool{}
	for _, p := range strings.Split(msg, "\n") {
		p = strings.TrimSpace(p)
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

// Describe renders where a DSN points, user@host:port/database, never the
// password. An empty DSN is described from libpq's environment.
func Describe(dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return Redact(dsn)
	}
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}

var kvPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// Redact returns dsn with any password replaced, in URL or keyword=value form.
func Redact(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), redactedPassword)
			}
			q := u.Query()
			if q.Has("password") {
				q.Set("password", redactedPassword)
				u.RawQuery = q.Encode()
			}
			return u.String()
		}
		// Unparseable URL: drop everything between "//" and "@".
		if at := strings.LastIndex(dsn, "@"); at > 0 {
			scheme := dsn[:strings.Index(dsn, "//")+2]
			return scheme + redactedPassword + dsn[at:]
		}
	}
	return kvPassword.ReplaceAllString(dsn, "${1}"+redactedPassword)
}

// Scrub removes the DSN's password from a message (driver errors may quote it).
func Scrub(dsn, msg string) string {
	for _, pw := range passwords(dsn) {
		if len(pw) >= 1 {
			msg = strings.ReplaceAll(msg, pw, redactedPassword)
		}
	}
	return msg
}

func passwords(dsn string) []string {
	var out []string
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
		if pw := u.Query().Get("password"); pw != "" {
			out = append(out, pw)
		}
	}
	for _, m := range kvPassword.FindAllStringSubmatch(dsn, -1) {
		out = append(out, strings.Trim(m[2], "'"))
	}
	if pw := os.Getenv("PGPASSWORD"); pw != "" {
		out = append(out, pw)
	}
	return out
}
