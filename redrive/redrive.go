// Package redrive sends an operation again through the service that owns its
// effect, for classes whose effect is application code: step 3 of the
// recovery protocol when the effect leaves the database (a payment provider,
// a bank). It carries the business identity, never a new one: over HTTP the
// Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header) holds the
// operation id and a tenant header the tenant; over NATS JetStream the
// Nats-Msg-Id is derived from (tenant_id, operation_id) and headers carry
// both. Whether the operation happened is never concluded from a reply: the
// caller (package recovery) reads the identity on the primary.
//
// A class's re-drive configuration is stored in idem.op_class and checked by
// the database (idem.class_redrive_set): allowed hosts only, https (or http to
// loopback, or an explicit insecure), credentials as references
// (env:IDEMCTL_REDRIVE_NAME, file:PATH under the credential directory of the
// person running resolve) resolved here at send time, never stored or
// printed. Before a run sends, every server is checked again against the
// allow-list (CheckTarget), and a redirect is never followed.
package redrive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/internal/pgerr"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/natsurl"
	"github.com/idemctl/idemctl/migrations"
)

// Kinds of re-drive.
const (
	KindHTTP = "http"
	KindNATS = "nats"
)

// Defaults.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultConcurrency  = 8
	DefaultTenantHeader = "Idem-Tenant"
	// OperationHeader carries the operation id in NATS messages (HTTP sends
	// it as the Idempotency-Key).
	OperationHeader = "Idem-Operation"
)

// Errors.
var (
	// ErrInvalidConfig: a configuration the database would refuse.
	ErrInvalidConfig = errors.New("invalid re-drive configuration")
	// ErrSecret: a credential given as a value instead of a reference.
	ErrSecret = errors.New("a re-drive configuration holds a credential")
	// ErrHostNotAllowed: the target's host is not on the allow-list.
	ErrHostNotAllowed = errors.New("re-drive host not on the allow-list")
	// ErrNotIdempotent: the class does not declare its downstream calls
	// idempotent, so a re-drive after a crash could charge twice.
	ErrNotIdempotent = errors.New("the class's downstream calls are not declared idempotent")
	// ErrNotStored: a NATS publish that no stream stored (nothing to wait for).
	ErrNotStored = errors.New("nothing was stored")
)

// Config is a class's re-drive configuration, as stored in idem.op_class.redrive.
type Config struct {
	Kind string `json:"kind"`
	// URL is the HTTP endpoint, or the NATS server for kind nats.
	URL string `json:"url"`
	// Subject is the NATS subject (a JetStream stream must take it).
	Subject string `json:"subject,omitempty"`
	// Method is POST (default) or PUT.
	Method string `json:"method,omitempty"`
	// Headers are extra headers; a value env:IDEMCTL_REDRIVE_NAME or
	// file:PATH is a reference, read when a run first sends (credentials
	// must be given that way; see Credentials).
	Headers map[string]string `json:"headers,omitempty"`
	// TenantHeader names the header carrying the tenant (Idem-Tenant).
	TenantHeader   string  `json:"tenant_header,omitempty"`
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	// Concurrency bounds the re-drives in flight to this target.
	Concurrency int `json:"concurrency,omitempty"`
	// Insecure allows plain http to a host that is not loopback.
	Insecure bool `json:"insecure,omitempty"`
}

// Timeout is the configured timeout, or DefaultTimeout.
func (c Config) Timeout() time.Duration {
	if c.TimeoutSeconds > 0 {
		return time.Duration(c.TimeoutSeconds * float64(time.Second))
	}
	return DefaultTimeout
}

func (c Config) concurrency() int {
	if c.Concurrency > 0 {
		return c.Concurrency
	}
	return DefaultConcurrency
}

func (c Config) tenantHeader() string {
	if c.TenantHeader != "" {
		return c.TenantHeader
	}
	return DefaultTenantHeader
}

// reserved says whether a header name is one a re-drive sets from the
// operation (its identity, its payload's hash, the message id the stream
// deduplicates by): a configured header must never replace it.
func (c Config) reserved(name string) bool {
	for _, r := range []string{"Nats-Msg-Id", "Idempotency-Key", "Idem-Payload-Hash", "Idem-Class", OperationHeader,
		"Content-Type", c.tenantHeader()} {
		if strings.EqualFold(name, r) {
			return true
		}
	}
	return false
}

// Target says where a re-drive goes, without secrets: the URL, or the NATS
// server and subject.
func (c Config) Target() string {
	if c.Kind == KindNATS {
		return c.URL + " " + c.Subject
	}
	return c.URL
}

var (
	headerNameRE = regexp.MustCompile(`^[A-Za-z0-9-]+$`)
	subjectRE    = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
	credentialRE = regexp.MustCompile(`(?i)(authorization|cookie|token|secret|key|password|credential)`)
)

// Servers are the servers a re-drive connects to, parsed the way its client
// parses them: the URL for http; for nats every server of the
// comma-separated list (package natsurl). Each must have a host and no user,
// password or token.
func (c Config) Servers() ([]*url.URL, error) {
	var servers []*url.URL
	if c.Kind == KindNATS {
		list, err := natsurl.Servers(c.URL)
		if err != nil {
			return nil, fmt.Errorf("%w: --url: %w", ErrInvalidConfig, err)
		}
		servers = list
	} else {
		u, err := url.Parse(c.URL)
		if err != nil || u.Host == "" || u.Hostname() == "" {
			return nil, fmt.Errorf("%w: --url is not a URL with a host", ErrInvalidConfig)
		}
		servers = []*url.URL{u}
	}
	for _, u := range servers {
		if u.User != nil {
			return nil, fmt.Errorf("%w: the URL holds credentials; give them as a header reference (--header 'Authorization=env:%sNAME')", ErrSecret, EnvPrefix)
		}
	}
	return servers, nil
}

// Hosts are the lower-case hosts of every server (an IPv6 address without
// brackets), as the allow-list holds them.
func (c Config) Hosts() ([]string, error) {
	servers, err := c.Servers()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(servers))
	for i, u := range servers {
		out[i] = strings.ToLower(u.Hostname())
	}
	return out, nil
}

// Validate applies the rules idem.class_redrive_set applies (but the
// allow-list, which only the database holds), for a precise error first.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	servers, err := c.Servers()
	if err != nil {
		return err
	}
	switch c.Kind {
	case KindHTTP:
		u := servers[0]
		loopback := u.Hostname() == "127.0.0.1" || u.Hostname() == "localhost" || u.Hostname() == "::1"
		if u.Scheme != "https" && !(u.Scheme == "http" && (loopback || c.Insecure)) {
			return bad("--url must be https (plain http only to a loopback host, or with --allow-insecure)")
		}
		if c.Method != "" && c.Method != "POST" && c.Method != "PUT" {
			return bad("--method must be POST or PUT")
		}
	case KindNATS:
		for _, u := range servers {
			if u.Scheme != "nats" && u.Scheme != "tls" {
				return bad("a NATS re-drive needs nats:// or tls:// servers in --url (%s)", u.Redacted())
			}
		}
		if !subjectRE.MatchString(c.Subject) {
			return bad("--subject %q: a NATS subject without wildcards", c.Subject)
		}
	default:
		return bad("--redrive must be http or nats")
	}
	if c.TimeoutSeconds < 0 || c.TimeoutSeconds > 300 || c.Concurrency < 0 || c.Concurrency > 256 {
		return bad("--timeout must be at most 5m and --concurrency at most 256")
	}
	if c.TenantHeader != "" && !headerNameRE.MatchString(c.TenantHeader) {
		return bad("--tenant-header %q is not a header name", c.TenantHeader)
	}
	for name, v := range c.Headers {
		if !headerNameRE.MatchString(name) || idem.CheckText("header "+name, v, 4096) != nil {
			return bad("--header %q: NAME=VALUE with a header name and a value without control characters", name)
		}
		if c.reserved(name) {
			return bad("--header %s: idemctl sets this header from the operation's identity; it cannot be configured", name)
		}
		if credentialRE.MatchString(name) && !isRef(v) {
			return fmt.Errorf("%w: header %s carries a credential: give env:%sNAME or file:PATH, never the value", ErrSecret, name, EnvPrefix)
		}
		if err := checkRef(v); err != nil {
			return fmt.Errorf("%w: header %s: %w", ErrSecret, name, err)
		}
	}
	return nil
}

// CheckTarget checks, when the configuration is about to be used, that every
// server it connects to is on the allow-list now (read from q), with the
// client's own parser, and that the database still accepts the whole
// configuration (idem.redrive_problem): the allow-list may have shrunk since
// the class was set, and the database parses URLs its own way.
func (c Config) CheckTarget(ctx context.Context, q idem.DBTX) error {
	if err := c.Validate(); err != nil {
		return err
	}
	hosts, err := c.Hosts()
	if err != nil {
		return err
	}
	allowed, err := Hosts(ctx, q)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if !slices.Contains(allowed, h) {
			return fmt.Errorf("%w: %s (the schema owner adds it: idemctl redrive allow %s)", ErrHostNotAllowed, h, h)
		}
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	var problem *string
	if err := q.QueryRow(ctx, "SELECT idem.redrive_problem($1)", raw).Scan(&problem); err != nil {
		return fmt.Errorf("check the re-drive target: %w", err)
	}
	if problem != nil {
		code, msg, _ := strings.Cut(*problem, " ")
		if s, ok := sqlErrors.Codes[code]; ok {
			return fmt.Errorf("%w: %s", s, msg)
		}
		return fmt.Errorf("%w: %s", ErrInvalidConfig, *problem)
	}
	return nil
}

// ClassConfig is what idemctl knows of a class's re-drive.
type ClassConfig struct {
	Class string `json:"class"`
	// Redrive is nil when the class is not re-driven.
	Redrive              *Config `json:"redrive"`
	DownstreamIdempotent bool    `json:"downstream_idempotent"`
}

// Set configures (or, with cfg nil, clears) a class's re-drive through
// idem.class_redrive_set, which checks it again and records the change in
// the audit log.
func Set(ctx context.Context, pool *pgxpool.Pool, class string, cfg *Config, downstreamIdempotent bool, operator string) (ClassConfig, error) {
	var raw any
	if cfg != nil {
		if err := cfg.Validate(); err != nil {
			return ClassConfig{}, err
		}
		b, err := json.Marshal(cfg)
		if err != nil {
			return ClassConfig{}, err
		}
		raw = b
	}
	_, err := pool.Exec(ctx, "SELECT idem.class_redrive_set($1, $2, $3, $4)", class, raw, downstreamIdempotent, operator)
	if err != nil {
		return ClassConfig{}, mapError(err)
	}
	return Get(ctx, pool, class)
}

// Get reads a class's re-drive configuration.
func Get(ctx context.Context, q idem.DBTX, class string) (ClassConfig, error) {
	c := ClassConfig{Class: class}
	var raw []byte
	err := q.QueryRow(ctx, "SELECT redrive, downstream_idempotent FROM idem.op_class WHERE name = $1", class).Scan(&raw, &c.DownstreamIdempotent)
	if errors.Is(err, pgx.ErrNoRows) {
		return ClassConfig{}, fmt.Errorf("%w %q (idemctl class list shows them)", idem.ErrUnknownClass, class)
	}
	if err != nil {
		return ClassConfig{}, fmt.Errorf("read class %s: %w", class, err)
	}
	if raw != nil {
		c.Redrive = &Config{}
		if err := json.Unmarshal(raw, c.Redrive); err != nil {
			return ClassConfig{}, fmt.Errorf("read class %s re-drive: %w", class, err)
		}
	}
	return c, nil
}

// sqlErrors maps the re-drive SQLSTATEs to this package's errors.
var sqlErrors = pgerr.Table{Named: true, Codes: map[string]error{
	"IX003": idem.ErrUnknownClass,
	"IX015": ErrInvalidConfig,
	"IX501": ErrInvalidConfig,
	"IX502": ErrInvalidConfig,
	"IX503": ErrSecret,
	"IX504": ErrHostNotAllowed,
}}

func mapError(err error) error { return sqlErrors.Map(err) }

// Allow puts host on the re-drive allow-list; Disallow takes it off. Only a
// login that may act as the schema owner may (idem.redrive_allow,
// idem.redrive_disallow, both audited).
func Allow(ctx context.Context, conn *pgx.Conn, host string) error {
	return ownerCall(ctx, conn, "SELECT idem.redrive_allow($1)", strings.ToLower(host))
}

// Disallow takes host off the re-drive allow-list.
func Disallow(ctx context.Context, conn *pgx.Conn, host string) error {
	return ownerCall(ctx, conn, "SELECT idem.redrive_disallow($1)", strings.ToLower(host))
}

// Hosts lists the allow-list.
func Hosts(ctx context.Context, q idem.DBTX) ([]string, error) {
	rows, err := q.Query(ctx, "SELECT host FROM idem.redrive_host ORDER BY host")
	if err != nil {
		return nil, fmt.Errorf("read the re-drive allow-list: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func ownerCall(ctx context.Context, conn *pgx.Conn, sql string, args ...any) error {
	err := migrations.AsOwner(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, sql, args...)
		return err
	})
	return mapError(err)
}
