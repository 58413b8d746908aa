package horizon_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// sourceSecret is the credential every spelling below carries.
const sourceSecret = "S3cr3tHunter2"

// secretSpellings are replay-source configs that carry sourceSecret as a
// credential, each as `horizon source add` flags: in the URL or
// keyword/value form of a DSN (pgx reads ?pass%77ord= as the password), as a
// NATS token or user in any server of a list, as a Kafka broker's user.
var secretSpellings = [][]string{
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "postgres://u:" + sourceSecret + "@h/db"},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "postgresql://u:" + sourceSecret + "@h/db"},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "postgres://:" + sourceSecret + "@h/db"},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "postgres://u:" + sourceSecret + "@h1:5432,h2:5433/db?target_session_attrs=read-write"},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "postgres://u:" + sourceSecret + "@[::1]:5432/db"},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "postgres://u:" + sourceSecret + "@/db?host=/tmp"},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "postgres://u@h/db?password=" + sourceSecret},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "postgres://u@h/db?pass%77ord=" + sourceSecret},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "postgres://u@h/db?%70assword=" + sourceSecret},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "postgres://u@h/db?%50ASSWORD=" + sourceSecret},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "postgres://u@h/db?sslpassword=" + sourceSecret},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "postgres://u@h/db?sslmode=disable&password=" + sourceSecret},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "postgres://u@h/db?PASSWORD=" + sourceSecret},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "postgres://h/db?user=u&password=" + sourceSecret},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "host=h user=u password=" + sourceSecret},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "host=h user=u password = " + sourceSecret},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "host=h user=u password='" + sourceSecret + "'"},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "host=h user=u PASSWORD=" + sourceSecret},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "host=h user=u Password=" + sourceSecret},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "host=h sslpassword=" + sourceSecret},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "password=" + sourceSecret + " host=h"},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "host=h\tpassword=" + sourceSecret},
	{"--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "host=h api_token=" + sourceSecret},
	{"--kind", "nats", "--stream", "S", "--url", "nats://" + sourceSecret + "@127.0.0.1:4222"},
	{"--kind", "nats", "--stream", "S", "--url", "nats://u:" + sourceSecret + "@127.0.0.1:4222"},
	{"--kind", "nats", "--stream", "S", "--url", "tls://" + sourceSecret + "@127.0.0.1:4222"},
	{"--kind", "nats", "--stream", "S", "--url", sourceSecret + "@127.0.0.1:4222"},
	{"--kind", "nats", "--stream", "S", "--url", "nats://127.0.0.1:4222," + sourceSecret + "@127.0.0.2:4222"},
	{"--kind", "nats", "--stream", "S", "--url", "nats://127.0.0.1:4222, nats://u:" + sourceSecret + "@127.0.0.2:4222"},
	{"--kind", "nats", "--stream", "S", "--url", "nats://127.0.0.1:4222?token=" + sourceSecret},
	{"--kind", "kafka", "--topic", "t", "--brokers", "u:" + sourceSecret + "@127.0.0.1:9092"},
	{"--kind", "kafka", "--topic", "t", "--brokers", "127.0.0.1:9092," + sourceSecret + "@127.0.0.2:9092"},
	{"--kind", "kafka", "--topic", "t", "--brokers", "sasl://u:" + sourceSecret + "@127.0.0.1:9092"},
	{"--kind", "kafka", "--topic", "t", "--brokers", "127.0.0.1:9092?password=" + sourceSecret},
}

// Every spelling of a credential in a replay source's config is refused:
// nothing is stored, nothing printed (by the refusal, by source list), and
// nothing written into the audit log. The database refuses each too
// (internal/attack TestSourceSecretsInSQL).
func TestSourceSecretSpellings(t *testing.T) {
	t.Parallel()
	require.GreaterOrEqual(t, len(secretSpellings), 30)
	pool, dsn := dbtest.NewPool(t, 2)
	for i, spelling := range secretSpellings {
		args := append([]string{"horizon", "source", "add", "leak", "--operator", "alice"}, spelling...)
		code, out, errOut := runQ(t, dsn, args...)
		assert.NotEqual(t, cmdutil.ExitOK, code, "%d %q was stored", i, spelling)
		assert.NotContains(t, out+errOut, sourceSecret, "%d %q: the refusal prints it", i, spelling)
	}
	var stored int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM idem.horizon_source").Scan(&stored))
	assert.Zero(t, stored)
	code, out, errOut := runQ(t, dsn, "horizon", "source", "list", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.NotContains(t, out, sourceSecret)
	code, out, errOut = runQ(t, dbtest.As(dsn, dbtest.Auditor), "audit", "list", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.NotContains(t, out, sourceSecret)
	assert.NotContains(t, out, "horizon.source.add")
	var audited int
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT count(*) FROM idem.audit WHERE details::text ILIKE '%' || $1 || '%'", sourceSecret).Scan(&audited))
	assert.Zero(t, audited)

	// The ways that remain: the password's variable, a user in the DSN,
	// servers without credentials.
	for _, ok := range [][]string{
		{"pg", "--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "postgres://reader@h1:5432,h2:5432/app?sslmode=verify-full", "--password-env", "IDEMCTL_SOURCE_DLQ_PASSWORD"},
		{"kv", "--kind", "postgres", "--query", "SELECT now()", "--source-dsn", "host=h user=reader dbname=app connect_timeout=5"},
		{"n", "--kind", "nats", "--stream", "DLQ", "--url", "nats://127.0.0.1:4222,127.0.0.2:4222"},
		{"k", "--kind", "kafka", "--topic", "payments.dlq", "--brokers", "127.0.0.1:9092,[::1]:9093,kafka-1"},
	} {
		code, _, errOut := runQ(t, dsn, append([]string{"horizon", "source", "add", "--operator", "alice"}, ok...)...)
		assert.Equal(t, cmdutil.ExitOK, code, "%q: %s", ok, errOut)
	}
}
