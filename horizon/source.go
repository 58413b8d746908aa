package horizon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/internal/db"
)

// Kind is what a replay source is.
type Kind string

// Source kinds. Manual is built in: the pending corrections kept by idemctl.
const (
	KindPostgres Kind = "postgres"
	KindArchive  Kind = "archive"
	KindManual   Kind = "manual"
	KindNATS     Kind = "nats"
	KindKafka    Kind = "kafka"
)

// Mode is how a source proves that it cannot replay before a cutoff.
type Mode string

// Modes of proof.
const (
	// Bounding: its oldest replayable message is newer than the cutoff plus
	// the margin.
	Bounding Mode = "bounding"
	// Enumerating: it lists the identities it could replay; they are pinned
	// (never purged) and nothing else can be replayed from it.
	Enumerating Mode = "enumerating"
)

// PasswordEnvPrefix starts the name of every variable a postgres source's
// password_env may name: the source is configured by an operator, and the
// variable is read from the environment of whoever probes it.
const PasswordEnvPrefix = "IDEMCTL_SOURCE_"

// ManualSource is the name of the built-in source of pending corrections.
const ManualSource = "manual"

// ErrBuiltinSource: the built-in source manual is not a row of the sources
// table: it cannot be added or removed (its corrections leave it when done).
var ErrBuiltinSource = errors.New("source manual is built in and cannot be removed")

// DefaultProbeTimeout bounds a probe when the source names none.
const DefaultProbeTimeout = 30 * time.Second

// Default header names carrying an identity in NATS and Kafka messages.
const (
	DefaultTenantHeader    = "Idem-Tenant"
	DefaultOperationHeader = "Idem-Operation"
)

// Errors of source management.
var (
	// ErrInvalidSource: a source definition that cannot be probed.
	ErrInvalidSource = errors.New("invalid replay source")
	// ErrSourceNotFound: no source of that name.
	ErrSourceNotFound = errors.New("replay source not found")
	// ErrSourceExists: a source of that name exists.
	ErrSourceExists = errors.New("replay source already exists")
)

// SourceConfig is the kind-specific configuration of a source, stored as JSON.
// Only the fields of the source's kind are set.
type SourceConfig struct {
	// postgres: a DSN without any secret (a libpq service=NAME, a passfile
	// entry, or PasswordEnv supply the password) and a query returning
	// either one timestamp (the oldest replayable message; bounding) or rows of
	// (tenant_id, operation_id, ts) (enumerating).
	DSN   string `json:"dsn,omitempty"`
	Query string `json:"query,omitempty"`
	// PasswordEnv names the environment variable that holds the postgres
	// source's password when idemctl probes it; the password itself is never
	// stored.
	PasswordEnv string `json:"password_env,omitempty"`
	// archive: a directory of .ndjson / .ndjson.gz files.
	Dir string `json:"dir,omitempty"`
	// nats: server URL and JetStream stream.
	URL    string `json:"url,omitempty"`
	Stream string `json:"stream,omitempty"`
	// kafka: seed brokers and topic.
	Brokers []string `json:"brokers,omitempty"`
	Topic   string   `json:"topic,omitempty"`
	// nats, kafka: bounding (oldest message time) or enumerating (every
	// message's identity headers).
	Mode            Mode   `json:"mode,omitempty"`
	TenantHeader    string `json:"tenant_header,omitempty"`
	OperationHeader string `json:"operation_header,omitempty"`
}

// Source is a place that could still replay operations.
type Source struct {
	Name      string        `json:"name"`
	Kind      Kind          `json:"kind"`
	Config    SourceConfig  `json:"config"`
	Timeout   time.Duration `json:"-"`
	CreatedAt time.Time     `json:"created_at,omitzero"`
	CreatedBy string        `json:"created_by,omitempty"`
}

// MarshalJSON renders the timeout in seconds.
func (s Source) MarshalJSON() ([]byte, error) {
	type plain Source
	return json.Marshal(struct {
		plain
		TimeoutSeconds float64 `json:"timeout_seconds"`
	}{plain(s), s.Timeout.Seconds()})
}

// Redacted returns the source with its secrets masked, for display and audit.
func (s Source) Redacted() Source {
	if s.Config.DSN != "" {
		s.Config.DSN = db.Redact(s.Config.DSN)
	}
	return s
}

// Describe says in one line where the source points, without secrets.
func (s Source) Describe() string {
	c := s.Config
	switch s.Kind {
	case KindPostgres:
		return db.Describe(c.DSN)
	case KindArchive:
		return c.Dir
	case KindNATS:
		return fmt.Sprintf("%s stream %s (%s)", c.URL, c.Stream, c.mode())
	case KindKafka:
		return fmt.Sprintf("%v topic %s (%s)", c.Brokers, c.Topic, c.mode())
	case KindManual:
		return "pending corrections (idemctl corrections)"
	}
	return ""
}

func (c SourceConfig) mode() Mode {
	if c.Mode == "" {
		return Bounding
	}
	return c.Mode
}

func (c SourceConfig) tenantHeader() string {
	if c.TenantHeader == "" {
		return DefaultTenantHeader
	}
	return c.TenantHeader
}

func (c SourceConfig) operationHeader() string {
	if c.OperationHeader == "" {
		return DefaultOperationHeader
	}
	return c.OperationHeader
}

var (
	sourceNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)
	// passwordEnvRE: a source names only a variable set aside for sources,
	// never PGPASSWORD or a cloud key of whoever probes it.
	passwordEnvRE = regexp.MustCompile(`^` + PasswordEnvPrefix + `[A-Z0-9_]+$`)
)

// Validate checks a source definition before it is stored.
func (s Source) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidSource, s.Name, fmt.Sprintf(format, a...))
	}
	if !sourceNameRE.MatchString(s.Name) || len(s.Name) > 64 {
		return bad("a name is lower-case letters, digits, '.', '_' or '-', at most 64 bytes")
	}
	if s.Name == ManualSource {
		return bad("manual is built in")
	}
	if s.Timeout < 0 {
		return bad("the timeout must be positive")
	}
	c := s.Config
	switch s.Kind {
	case KindPostgres:
		if c.DSN == "" || c.Query == "" {
			return bad("postgres needs --source-dsn and --query")
		}
		if db.HasSecret(c.DSN) {
			return s.errSecret("the DSN ("+db.Redact(c.DSN)+")", dsnHint)
		}
		if err := s.checkDSN(); err != nil {
			return err
		}
		if c.PasswordEnv != "" && !passwordEnvRE.MatchString(c.PasswordEnv) {
			return bad("--password-env %q: a source's password is read from a variable named %s... (set aside for sources by whoever probes them)",
				c.PasswordEnv, PasswordEnvPrefix)
		}
	case KindArchive:
		if c.Dir == "" {
			return bad("archive needs --dir")
		}
	case KindNATS:
		if c.URL == "" || c.Stream == "" {
			return bad("nats needs --url and --stream")
		}
		if err := s.checkNATS(); err != nil {
			return err
		}
	case KindKafka:
		if len(c.Brokers) == 0 || c.Topic == "" {
			return bad("kafka needs --brokers and --topic")
		}
		if err := s.checkKafka(); err != nil {
			return err
		}
	case KindManual:
		return bad("manual is built in")
	default:
		return bad("unknown kind %q: use postgres, archive, nats or kafka", s.Kind)
	}
	if s.Kind == KindNATS || s.Kind == KindKafka {
		if c.Mode != "" && c.Mode != Bounding && c.Mode != Enumerating {
			return bad("mode %q: use bounding or enumerating", c.Mode)
		}
	}
	if err := s.checkFields(); err != nil {
		return err
	}
	return s.checkHeaders()
}

// AddSource stores a source (idem.horizon_source_add, which refuses a secret
// in its config and writes the audit row).
func AddSource(ctx context.Context, pool *pgxpool.Pool, s Source, operator string) error {
	if err := checkOperator(operator); err != nil {
		return err
	}
	if err := s.Validate(); err != nil {
		return err
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultProbeTimeout
	}
	cfg, err := json.Marshal(s.Config)
	if err != nil {
		return err
	}
	_, err = pool.Exec(ctx, "SELECT idem.horizon_source_add($1, $2, $3, make_interval(secs => $4), $5)",
		s.Name, string(s.Kind), cfg, s.Timeout.Seconds(), operator)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "IX308" && strings.Contains(pgErr.Message, "already exists") {
		return fmt.Errorf("%w: %s", ErrSourceExists, s.Name)
	}
	if err != nil {
		return fmt.Errorf("add source %s: %w", s.Name, mapPlanError(err))
	}
	return nil
}

// RemoveSource plans removing a source (idem.horizon_source_remove): a
// purge plan made without it would prove the horizon without it, so another
// person's approval (governance.ApproveChange) removes it. Returns the
// planned change.
func RemoveSource(ctx context.Context, pool *pgxpool.Pool, name, operator, reason string) (governance.Change, error) {
	if err := checkOperator(operator); err != nil {
		return governance.Change{}, err
	}
	if name == ManualSource {
		return governance.Change{}, ErrBuiltinSource
	}
	c, err := governance.RemoveSource(ctx, pool, name, operator, reason)
	if errors.Is(err, governance.ErrSourceNotFound) {
		return c, fmt.Errorf("%w: %s", ErrSourceNotFound, name)
	}
	return c, err
}

// ListSources returns every source, the built-in manual one first. Configs
// carry their secrets: use Redacted before showing them.
func ListSources(ctx context.Context, q DBTX) ([]Source, error) {
	rows, err := q.Query(ctx, `SELECT name, kind, config, extract(epoch FROM timeout)::float8, created_at, created_by
		FROM idem.horizon_source ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	out := []Source{{Name: ManualSource, Kind: KindManual, Timeout: DefaultProbeTimeout}}
	for rows.Next() {
		var s Source
		var kind string
		var secs float64
		if err := rows.Scan(&s.Name, &kind, &s.Config, &secs, &s.CreatedAt, &s.CreatedBy); err != nil {
			return nil, err
		}
		s.Kind = Kind(kind)
		s.Timeout = time.Duration(secs * float64(time.Second))
		out = append(out, s)
	}
	return out, rows.Err()
}

// DBTX is what read-only functions need from a pool, a connection or a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
