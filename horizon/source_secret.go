package horizon

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/natsurl"
)

// A source's config is stored, listed and written for ever into the audit
// log, so it holds no credential in any spelling. Each kind's config is read
// by the parser of the client that uses it, and what that parser would
// take as a credential is refused (idem.horizon_source_problem refuses the
// plain forms again, for callers that are not idemctl).

// dsnKeys are the settings a source's DSN may hold: where the database is,
// who connects, how TLS is verified, which libpq service to read. pgconn
// refuses any other key (password, sslpassword, whatever their spelling or
// escaping in the URL or keyword/value form; servicefile and passfile too,
// which would point the probe at files of the operator's choosing).
var dsnKeys = []string{"host", "hostaddr", "port", "dbname", "user", "sslmode", "sslrootcert", "sslcert", "sslkey",
	"sslsni", "sslnegotiation", "service", "connect_timeout", "target_session_attrs", "application_name"}

// dsnSecretKeys are the keys pgconn reads a password from.
var dsnSecretKeys = []string{"password", "sslpassword"}

var (
	brokerRE      = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$`)
	streamRE      = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
	topicRE       = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)
	headerNameRE  = regexp.MustCompile(`^[A-Za-z0-9-]{1,128}$`)
	credentialish = regexp.MustCompile(`(?i)(pass|pwd|secret|token|credential)`)
)

// errSecret is the refusal of a source whose config holds a credential: it
// never quotes the config.
func (s Source) errSecret(where, hint string) error {
	return fmt.Errorf("%w: source %q: %s holds a credential; secrets are never stored in the database: %s",
		ErrSecretInConfig, s.Name, where, hint)
}

const dsnHint = "use --password-env NAME, a libpq service (service=NAME) or a passfile entry"

// checkDSN reads the DSN with pgconn's own parser, which takes only the
// allowed keys from it; a DSN that parses with a password key allowed and
// not without holds a password.
func (s Source) checkDSN() error {
	dsn := s.Config.DSN
	if _, err := pgconn.ParseConfigWithOptions(dsn, pgconn.ParseConfigOptions{ConnStringAllowedKeys: dsnKeys}); err == nil {
		return nil
	} else if _, loose := pgconn.ParseConfigWithOptions(dsn, pgconn.ParseConfigOptions{
		ConnStringAllowedKeys: append(append([]string{}, dsnKeys...), dsnSecretKeys...)}); loose == nil {
		return s.errSecret("the DSN", dsnHint)
	} else if credentialish.MatchString(dsn) || strings.Contains(dsn, "%") {
		// Unreadable, and perhaps a password in a form pgconn does not
		// take: refuse without quoting it.
		return s.errSecret("the DSN (not a valid DSN of the allowed settings "+strings.Join(dsnKeys, ", ")+")", dsnHint)
	} else {
		return fmt.Errorf("%w %q: the DSN is not valid, or holds a setting other than %s: %s",
			ErrInvalidSource, s.Name, strings.Join(dsnKeys, ", "), db.Scrub(dsn, parseProblem(err)))
	}
}

// parseProblem is pgconn's reason without the connection string it quotes.
func parseProblem(err error) string {
	var pe *pgconn.ParseConfigError
	msg := err.Error()
	if errors.As(err, &pe) {
		if i := strings.LastIndex(msg, "`: "); i >= 0 {
			msg = msg[i+3:]
		}
	}
	return msg
}

// checkNATS reads the URL as nats.go does, every server of its list: no
// user, password or token in any of them.
func (s Source) checkNATS() error {
	servers, err := natsurl.Servers(s.Config.URL)
	if err != nil {
		if strings.Contains(s.Config.URL, "@") || credentialish.MatchString(s.Config.URL) {
			return s.errSecret("the URL", "use a credentials file the probe reads from its environment")
		}
		return fmt.Errorf("%w %q: --url: %s", ErrInvalidSource, s.Name, err)
	}
	for _, u := range servers {
		if u.User != nil {
			return s.errSecret("the URL (a user, password or token of server "+u.Hostname()+")",
				"use a credentials file the probe reads from its environment")
		}
		if u.Scheme != "nats" && u.Scheme != "tls" {
			return fmt.Errorf("%w %q: --url: server %s is not nats:// or tls://", ErrInvalidSource, s.Name, u.Hostname())
		}
	}
	if !streamRE.MatchString(s.Config.Stream) {
		return fmt.Errorf("%w %q: --stream: a JetStream stream name (letters, digits, '_' or '-')", ErrInvalidSource, s.Name)
	}
	return nil
}

// checkKafka reads each seed broker as franz-go does, host[:port]: a
// user:password@ prefix, a scheme or a path is refused.
func (s Source) checkKafka() error {
	for i, b := range s.Config.Brokers {
		if brokerRE.MatchString(b) {
			continue
		}
		if strings.Contains(b, "@") || credentialish.MatchString(b) {
			return s.errSecret(fmt.Sprintf("broker %d", i+1), "configure the client's SASL credentials outside idemctl's database")
		}
		return fmt.Errorf("%w %q: broker %d is not host:port", ErrInvalidSource, s.Name, i+1)
	}
	if !topicRE.MatchString(s.Config.Topic) {
		return fmt.Errorf("%w %q: --topic: a Kafka topic name (letters, digits, '.', '_' or '-')", ErrInvalidSource, s.Name)
	}
	return nil
}

// checkFields: a source holds only its kind's settings (another kind's
// would be stored, listed and audited unchecked).
func (s Source) checkFields() error {
	c := s.Config
	set := map[string]bool{"dsn": c.DSN != "", "query": c.Query != "", "password_env": c.PasswordEnv != "", "dir": c.Dir != "",
		"url": c.URL != "", "stream": c.Stream != "", "brokers": len(c.Brokers) > 0, "topic": c.Topic != "", "mode": c.Mode != "",
		"tenant_header": c.TenantHeader != "", "operation_header": c.OperationHeader != ""}
	own := map[Kind][]string{
		KindPostgres: {"dsn", "query", "password_env"},
		KindArchive:  {"dir"},
		KindNATS:     {"url", "stream", "mode", "tenant_header", "operation_header"},
		KindKafka:    {"brokers", "topic", "mode", "tenant_header", "operation_header"},
	}[s.Kind]
	for _, k := range own {
		delete(set, k)
	}
	for k, v := range set {
		if v {
			return fmt.Errorf("%w %q: %s is not a setting of a %s source", ErrInvalidSource, s.Name, k, s.Kind)
		}
	}
	return nil
}

// checkHeaders: the identity headers are header names.
func (s Source) checkHeaders() error {
	for _, h := range []string{s.Config.TenantHeader, s.Config.OperationHeader} {
		if h != "" && !headerNameRE.MatchString(h) {
			return fmt.Errorf("%w %q: a header name is letters, digits and '-'", ErrInvalidSource, s.Name)
		}
	}
	return nil
}
