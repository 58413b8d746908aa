// Package db opens idemctl's connections to PostgreSQL: where the DSN comes
// from, the session settings every idemctl connection carries, and how a DSN is
// shown without its password.
package db

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// ErrInvalidDSN: the DSN cannot be parsed. The message never repeats it.
var ErrInvalidDSN = errors.New("invalid DSN")

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
	// Password, when set, is used instead of any in the DSN or the
	// environment (a replay source's password from its environment variable).
	Password string
	// NoEnvPassword: the DSN's server was chosen by someone else (a replay
	// source), so PGPASSWORD, the password of whoever runs idemctl for their
	// own database, is never sent to it.
	NoEnvPassword    bool
	StatementTimeout time.Duration
	IdleInTxTimeout  time.Duration
	MaxConns         int32
	// PasswordEnv names the variable Password was read from, for a connect
	// error's hint (a source's password_env).
	PasswordEnv string
	// Origin says where the DSN came from in a connect error ("DSN from
	// --from-postgres", "replay source NAME"); empty: idemctl's own database
	// (DSNOrigin: --dsn, IDEMCTL_DSN, DATABASE_URL or libpq's variables).
	Origin string
	// PasswordBySCRAMOnly: Password is sent only in a SCRAM exchange (or no
	// authentication at all): a server that asks for it in clear text or
	// as an MD5 hash is refused before anything is sent (require_auth).
	PasswordBySCRAMOnly bool
}

// Config parses dsn into a pool config carrying idemctl's session settings.
// application_name is only set when the DSN does not choose one.
func Config(dsn string, o Options) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: %s (want postgres://user@host:5432/db, or host=... dbname=...)", ErrInvalidDSN,
			oneLine(Scrub(dsn, err.Error())))
	}
	if o.Password != "" {
		cfg.ConnConfig.Password = o.Password
		if o.PasswordBySCRAMOnly {
			cfg.ConnConfig.RequireAuth = "scram-sha-256,none"
		}
	} else if env := os.Getenv("PGPASSWORD"); o.NoEnvPassword && env != "" && cfg.ConnConfig.Password == env {
		cfg.ConnConfig.Password = ""
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
		return nil, connectError(dsn, o, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, connectError(dsn, o, err)
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
		return nil, connectError(dsn, o, err)
	}
	return conn, nil
}

// ConnectSource opens one connection to a source's database (an import's
// store, a replay source) the way every source is reached: the DSN holds no
// secret and PGPASSWORD is never sent; the password comes only from the
// variable passwordEnv names (empty: none). A connect error names origin,
// still matches ErrConnect, and never shows the password.
func ConnectSource(ctx context.Context, dsn, passwordEnv, origin string) (*pgx.Conn, error) {
	return connectSource(ctx, dsn, Options{NoEnvPassword: true, Origin: origin, PasswordEnv: passwordEnv})
}

// ConnectStoredSource is ConnectSource for a source whose DSN is stored in
// the database (a replay source), where another operator may have set it:
// the password from passwordEnv is sent only in a SCRAM exchange, which
// does not give it to the server, so a host the DSN names cannot ask for it
// in clear text or as an MD5 hash (a connect error saying so; nothing sent).
func ConnectStoredSource(ctx context.Context, dsn, passwordEnv, origin string) (*pgx.Conn, error) {
	return connectSource(ctx, dsn, Options{NoEnvPassword: true, Origin: origin, PasswordEnv: passwordEnv, PasswordBySCRAMOnly: true})
}

func connectSource(ctx context.Context, dsn string, o Options) (*pgx.Conn, error) {
	passwordEnv := o.PasswordEnv
	if passwordEnv != "" {
		pw, ok := os.LookupEnv(passwordEnv)
		if !ok {
			return nil, fmt.Errorf("the source's password variable %s is not set in idemctl's environment", passwordEnv)
		}
		o.Password = pw
	}
	conn, err := Connect(ctx, dsn, o)
	if err != nil {
		return nil, Reword(err, func(msg string) string {
			if o.Password != "" {
				msg = strings.ReplaceAll(msg, o.Password, "********")
			}
			return Scrub(dsn, msg)
		})
	}
	return conn, nil
}

// connectError says why the server could not be reached, cause first, in
// one line: "password authentication failed for user "alice" at
// db1:5432", then where the DSN came from and what to check. The TLS
// attempt libpq's sslmode=prefer makes first is left out, and an unknown
// host is named once.
func connectError(dsn string, o Options, err error) error {
	cause, hint := connectCause(err)
	if hint == passwordHint && o.NoEnvPassword {
		// A source's password never comes from PGPASSWORD.
		hint = "a source's password comes from the variable its password_env names, or ~/.pgpass; never PGPASSWORD"
		if o.PasswordEnv != "" {
			hint = "the password comes from " + o.PasswordEnv
		}
	}
	origin := o.Origin
	if origin == "" {
		origin = DSNOrigin(dsn)
	}
	where := "?"
	if cfg, perr := pgx.ParseConfig(dsn); perr == nil {
		where = fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	}
	msg := fmt.Sprintf("%s at %s (%s: %s; %s)", cause, where, origin, Describe(dsn), hint)
	return &ConnectError{msg: Scrub(dsn, msg), err: err}
}

// ConnectError is a failure to reach the database, its cause first. It
// matches ErrConnect (errors.Is).
type ConnectError struct {
	msg string
	err error
}

func (e *ConnectError) Error() string        { return e.msg }
func (e *ConnectError) Unwrap() error        { return e.err }
func (e *ConnectError) Is(target error) bool { return target == ErrConnect }

// Reword returns err's text passed through f (a secret masked), still
// matching ErrConnect when err did; the driver's error behind it is dropped
// with its text.
func Reword(err error, f func(string) string) error {
	if errors.Is(err, ErrConnect) {
		return &ConnectError{msg: f(err.Error())}
	}
	return errors.New(f(err.Error()))
}

const passwordHint = "the password comes from the DSN, PGPASSWORD or ~/.pgpass"

// connectCause finds the cause in pgx's error (which joins one error per
// host and TLS attempt) and what to check about it.
func connectCause(err error) (cause, hint string) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "28P01", "28000":
			return pgErr.Message, passwordHint
		case "3D000":
			return pgErr.Message, "check the database name"
		}
		return pgErr.Message, "the server refused the session"
	}
	if strings.Contains(err.Error(), "require_auth check failed") {
		return "the server asked for the source's password in clear text or as an MD5 hash: not sent",
			"a replay source's password goes only by SCRAM: give its login a scram-sha-256 password and pg_hba.conf method; a host you did not expect: check the source (idemctl horizon source list)"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return fmt.Sprintf("unknown host %q", dnsErr.Name), "check the host name"
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "connection refused", "is the server up and listening there?"
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return "no answer (timed out)", "is the host reachable, and the port open?"
	}
	return lastAttempt(err.Error()), "check the DSN, and that the server is up"
}

// lastAttempt is the last line of pgx's multi-line connect error that is
// not about the TLS attempt, without pgx's "failed to connect to" prefix.
func lastAttempt(msg string) string {
	last := ""
	for _, line := range strings.Split(msg, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.Contains(line, "tls error") || strings.Contains(line, "server refused TLS") ||
			strings.HasPrefix(line, "failed to connect to") && strings.HasSuffix(line, ":") {
			continue
		}
		last = line
	}
	if last == "" {
		return oneLine(msg)
	}
	return last
}

// DSNOrigin says where the DSN in use came from, for messages: the --dsn
// flag, IDEMCTL_DSN, DATABASE_URL, or libpq's PG* variables (named, with the
// service file when a service is used).
func DSNOrigin(dsn string) string {
	origin := "DSN from --dsn"
	switch {
	case dsn == "":
		var set []string
		for _, env := range append(targetEnv, "PGSERVICEFILE", "PGSSLMODE") {
			if os.Getenv(env) != "" {
				set = append(set, env)
			}
		}
		origin = "DSN from libpq's defaults (no PG* variable set)"
		if len(set) > 0 {
			origin = "DSN from " + strings.Join(set, ", ")
		}
	case dsn == os.Getenv("IDEMCTL_DSN"):
		origin = "DSN from IDEMCTL_DSN"
	case dsn == os.Getenv("DATABASE_URL"):
		origin = "DSN from DATABASE_URL"
	}
	if svc := ServiceName(dsn); svc != "" {
		file := os.Getenv("PGSERVICEFILE")
		if file == "" {
			file = "~/.pg_service.conf"
		}
		origin += fmt.Sprintf(", service %s from %s", svc, file)
	}
	return origin
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
// password, followed by the libpq service it names, if any:
// "alice@db1:5432/payments (service prod)". An empty DSN is described from
// libpq's environment.
func Describe(dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "an invalid DSN"
	}
	s := fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
	if svc := ServiceName(dsn); svc != "" {
		s += " (service " + svc + ")"
	}
	return s
}

// serviceKV finds service=NAME in keyword/value form or in a URL's query.
var serviceKV = regexp.MustCompile(`(?:^|[\s?&])service\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&]+)`)

// ServiceName is the libpq service a DSN connects through (service=NAME in
// the DSN, else PGSERVICE), or "".
func ServiceName(dsn string) string {
	if m := serviceKV.FindStringSubmatch(dsn); m != nil {
		v := strings.Trim(m[1], "'")
		if u, err := url.QueryUnescape(v); err == nil {
			v = u
		}
		return v
	}
	return os.Getenv("PGSERVICE")
}

// targetEnv are the libpq variables that name a server or a database.
var targetEnv = []string{"PGSERVICE", "PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER"}

// ErrNoDSN: nothing names a database. idemctl never falls back to libpq's
// built-in default (the local socket, a database named after the OS user)
// silently: on an engineer's laptop that is rarely the database meant.
var ErrNoDSN = errors.New("no database named: pass --dsn, or set IDEMCTL_DSN (or DATABASE_URL, PGSERVICE, PGHOST and PGDATABASE)")

// CheckTarget returns ErrNoDSN when dsn is empty and no libpq variable names
// a server, a database or a service.
func CheckTarget(dsn string) error {
	if dsn != "" {
		return nil
	}
	for _, env := range targetEnv {
		if os.Getenv(env) != "" {
			return nil
		}
	}
	return ErrNoDSN
}

var (
	// kvSecret finds password=... and sslpassword=... in keyword/value form or
	// in a URL's query (value quoted, or up to a space or &).
	kvSecret = regexp.MustCompile(`(?i)((?:^|[\s?&])(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)`)
	// userinfo finds the password of scheme://user:password@, whatever the
	// scheme (a mistyped postgress:// too), up to the last @ (a raw @ in a
	// password); bareUserinfo that of user:password@host/db.
	userinfo     = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*://)([^:/@\s]*):(\S*)@`)
	bareUserinfo = regexp.MustCompile(`^()([^:/@\s=]+):(\S*)@`)
)

// Redact returns dsn with every secret replaced (password and sslpassword, in
// URL, keyword/value or malformed form), for messages and display.
func Redact(dsn string) string {
	if m := userinfoOf(dsn).FindStringSubmatchIndex(dsn); m != nil {
		dsn = dsn[:m[6]] + redactedPassword + dsn[m[7]:]
	}
	return kvSecret.ReplaceAllString(dsn, "${1}"+redactedPassword)
}

func userinfoOf(dsn string) *regexp.Regexp {
	if strings.Contains(dsn, "://") {
		return userinfo
	}
	return bareUserinfo
}

// HasSecret reports whether dsn carries a secret (a password or an
// sslpassword) in any form Redact would mask.
func HasSecret(dsn string) bool { return Redact(dsn) != dsn }

// Scrub removes the DSN's secrets from a message (driver errors may quote them).
func Scrub(dsn, msg string) string {
	for _, pw := range secrets(dsn) {
		if len(pw) >= 1 {
			msg = strings.ReplaceAll(msg, pw, redactedPassword)
		}
	}
	return Redact(msg)
}

func secrets(dsn string) []string {
	var out []string
	if m := userinfoOf(dsn).FindStringSubmatch(dsn); m != nil && m[3] != "" {
		out = append(out, m[3])
		if u, err := url.PathUnescape(m[3]); err == nil {
			out = append(out, u, url.QueryEscape(u))
		}
	}
	for _, m := range kvSecret.FindAllStringSubmatch(dsn, -1) {
		v := strings.Trim(m[2], "'")
		out = append(out, v)
		if u, err := url.QueryUnescape(v); err == nil {
			out = append(out, u)
		}
	}
	for _, env := range []string{"PGPASSWORD", "PGSSLPASSWORD"} {
		if pw := os.Getenv(env); pw != "" {
			out = append(out, pw)
		}
	}
	return out
}
