package attack_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSourceSecretsInSQL (finding: a source's config passed the secret
// filter with a NATS token, ?pass%77ord=, nested JSON objects and Kafka
// brokers user:pass@host, and was stored, listed and audited for ever): an
// operator calling idem.horizon_source_add directly is refused every such
// config, the error does not echo the secret, and nothing is written.
func TestSourceSecretsInSQL(t *testing.T) {
	t.Parallel()
	w := setup(t)
	const secret = "S3cr3tHunter2"
	pg := func(dsn string) map[string]any { return map[string]any{"dsn": dsn, "query": "SELECT 1"} }
	nats := func(url string) map[string]any { return map[string]any{"url": url, "stream": "S"} }
	kafka := func(brokers ...string) map[string]any { return map[string]any{"brokers": brokers, "topic": "t"} }
	cases := []struct {
		kind string
		cfg  map[string]any
	}{
		{"postgres", pg("postgres://u:" + secret + "@h/db")},
		{"postgres", pg("postgres://u:" + secret + "@h1:5432,h2:5433/db")},
		{"postgres", pg("postgres://u:" + secret + "@/db?host=/tmp")},
		{"postgres", pg("postgres://u@h/db?password=" + secret)},
		{"postgres", pg("postgres://u@h/db?pass%77ord=" + secret)},
		{"postgres", pg("postgres://u@h/db?%70assword=" + secret)},
		{"postgres", pg("postgres://u@h/db?sslpassword=" + secret)},
		{"postgres", pg("postgres://u@h/db?PASSWORD=" + secret)},
		{"postgres", pg("host=h password=" + secret)},
		{"postgres", pg("host=h password = " + secret)},
		{"postgres", pg("host=h PASSWORD='" + secret + "'")},
		{"postgres", pg("host=h\tsslpassword=" + secret)},
		{"postgres", pg("host=h api_token=" + secret)},
		{"postgres", map[string]any{"dsn": "host=h", "query": "SELECT 1", "password": secret}},
		{"postgres", map[string]any{"dsn": "host=h", "query": "SELECT 1", "Password": secret}},
		{"postgres", map[string]any{"dsn": "host=h", "query": "SELECT 1", "auth": map[string]any{"password": secret}}},
		{"postgres", map[string]any{"dsn": "host=h", "query": "SELECT 1", "extra": map[string]any{"nested": map[string]any{"value": secret}}}},
		{"postgres", map[string]any{"dsn": map[string]any{"host": "h", "password": secret}, "query": "SELECT 1"}},
		{"nats", nats("nats://" + secret + "@127.0.0.1:4222")},
		{"nats", nats("nats://u:" + secret + "@127.0.0.1:4222")},
		{"nats", nats(secret + "@127.0.0.1:4222")},
		{"nats", nats("nats://127.0.0.1:4222," + secret + "@127.0.0.2:4222")},
		{"nats", nats("nats://127.0.0.1:4222, tls://u:" + secret + "@127.0.0.2:4222")},
		{"nats", nats("nats://127.0.0.1:4222?token=" + secret)},
		{"nats", map[string]any{"url": "nats://127.0.0.1:4222", "stream": "S", "options": []string{secret}}},
		{"kafka", kafka("u:" + secret + "@127.0.0.1:9092")},
		{"kafka", kafka("127.0.0.1:9092", secret+"@127.0.0.2:9092")},
		{"kafka", kafka("127.0.0.1:9092?password=" + secret)},
		{"kafka", map[string]any{"brokers": []any{map[string]any{"sasl_password": secret}}, "topic": "t"}},
		{"kafka", map[string]any{"brokers": []string{"127.0.0.1:9092"}, "topic": "t", "sasl": map[string]any{"user": "u", "pass": secret}}},
		{"archive", map[string]any{"dir": "/x", "dsn": "postgres://u:" + secret + "@h/db"}},
		// Not a secret in the config, but one taken from whoever probes it.
		{"postgres", map[string]any{"dsn": "host=h", "query": "SELECT 1", "password_env": "PGPASSWORD"}},
	}
	require.GreaterOrEqual(t, len(cases), 30)
	before := w.snapshot()
	for _, c := range cases {
		cfg, err := json.Marshal(c.cfg)
		require.NoError(t, err)
		_, err = w.operator.Exec(w.ctx, "SELECT idem.horizon_source_add('leak', $1, $2, '30s', 'alice')", c.kind, cfg)
		assert.Contains(t, []string{"IX311", "IX308"}, code(err), "%s %s was stored", c.kind, cfg)
		assert.NotContains(t, fmt.Sprint(err), secret, "the refusal does not echo it")
	}
	assert.Equal(t, before, w.snapshot(), "nothing stored, nothing audited")
}

// TestRedriveTargetsInSQL (findings: a NATS server list was checked on its
// first host only; a class could reference the database password of whoever
// runs resolve, or any of their files): an operator calling
// idem.class_redrive_set directly is refused each, and nothing is written.
// idem.redrive_problem, which resolve asks before it sends, says the same.
func TestRedriveTargetsInSQL(t *testing.T) {
	t.Parallel()
	w := setup(t)
	cases := map[string]string{
		`{"kind":"nats","url":"nats://127.0.0.1:14222,127.0.0.2:14223","subject":"pay"}`:          "IX504",
		`{"kind":"nats","url":"nats://127.0.0.1:14222, evil.example:4222","subject":"pay"}`:       "IX504",
		`{"kind":"nats","url":"nats://127.0.0.1:14222,tok@127.0.0.1:14223","subject":"pay"}`:      "IX503",
		`{"kind":"nats","url":"nats://127.0.0.1:14222,http://127.0.0.1:80","subject":"pay"}`:      "IX502",
		`{"kind":"http","url":"http://127.0.0.1/x","headers":{"Authorization":"env:PGPASSWORD"}}`: "IX503",
		`{"kind":"http","url":"http://127.0.0.1/x","headers":{"X-Trace":"env:HOME"}}`:             "IX503",
		`{"kind":"http","url":"http://127.0.0.1/x","headers":{"X-Token":"file:/root/.pgpass"}}`:   "IX503",
		`{"kind":"http","url":"http://127.0.0.1/x","headers":{"X-Token":"file:../.pgpass"}}`:      "IX503",
		`{"kind":"http","url":"http://127.0.0.1/x","headers":{"X-Token":"file:a/../../b"}}`:       "IX503",
		`{"kind":"http","url":"http://127.0.0.1/x","headers":{"X-Token":"file:.ssh/id_rsa"}}`:     "IX503",
		`{"kind":"http","url":"http://127.0.0.1/x","headers":{"X-Token":"file:"}}`:                "IX503",
	}
	before := w.snapshot()
	for cfg, want := range cases {
		_, err := w.operator.Exec(w.ctx, "SELECT idem.class_redrive_set('demo.transfer_app', $1, true, 'alice')", cfg)
		assert.Equal(t, want, code(err), "%s: %v", cfg, err)
		var problem *string
		require.NoError(t, w.operator.QueryRow(w.ctx, "SELECT idem.redrive_problem($1)", cfg).Scan(&problem))
		if assert.NotNil(t, problem, cfg) {
			assert.True(t, strings.HasPrefix(*problem, want), "%s: %s", cfg, *problem)
		}
	}
	assert.Equal(t, before, w.snapshot(), "nothing written")
	// What the person running resolve sets aside is accepted.
	_, err := w.operator.Exec(w.ctx, "SELECT idem.class_redrive_set('demo.transfer_app', $1, true, 'alice')",
		`{"kind":"http","url":"http://127.0.0.1/x","headers":{"Authorization":"env:IDEMCTL_REDRIVE_PAYMENTS","X-Token":"file:payments/token"}}`)
	assert.NoError(t, err)
}
