package redrive_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/redrive"
)

// A re-drive to a service that is down (nothing listens: every connection
// refused) sent nothing: the line, the summary, its meaning and the audit
// record all say "not sent", none says the outcome is unknown or counts it
// re-driven. A service that answers 500 every time did receive it: there the
// outcome is unknown, and the summary, the meaning and the audit say so
// (where the error row's meaning said "a failed effect wrote nothing").
func TestRedriveToAStoppedServiceSaysNotSent(t *testing.T) {
	w := outboundWorld(t)
	ctx := context.Background()
	setURL := func(url string) {
		_, err := redrive.Set(ctx, w.pool, "demo.transfer_app", &redrive.Config{Kind: redrive.KindHTTP, URL: url, TimeoutSeconds: 1}, true, "alice")
		require.NoError(t, err)
	}
	lastRun := func() map[string]any {
		var details []byte
		require.NoError(t, w.pool.QueryRow(ctx, "SELECT details FROM idem.audit WHERE action = 'resolve.run' ORDER BY id DESC LIMIT 1").Scan(&details))
		var d map[string]any
		require.NoError(t, json.Unmarshal(details, &d))
		return d
	}
	file := filepath.Join(t.TempDir(), "app.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(appLine("t1", "op-1", 100)+"\n"), 0o600))

	setURL("http://" + freeAddr(t) + "/transfers") // nothing listens
	code, out, errOut := runTTY(t, w.dsn, "", "resolve", "--file", file, "--retry-for", "2s", "--operator", "alice", "-o", "wide")
	require.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, out, "1 error; 1 not sent (their service could not be reached; nothing ran)")
	assert.NotContains(t, out, "sent to their class's service")
	assert.NotContains(t, out, "unknown")
	assert.Contains(t, out, "nothing was sent")
	d := lastRun()
	assert.EqualValues(t, 0, d["redriven"])
	assert.EqualValues(t, 1, d["not_sent"])
	assert.EqualValues(t, 0, d["unknown"])
	code, got, errOut := w.resolve([]string{appLine("t1", "op-1", 100)}, "--retry-for", "1s")
	require.Equal(t, cmdutil.ExitInvalid, code, errOut)
	r := got["t1/op-1"]
	require.NotNil(t, r.Error)
	assert.Contains(t, *r.Error, "nothing was sent")
	require.NotNil(t, r.Redrive)
	assert.Equal(t, r.Redrive.Attempts, r.Redrive.NotSent, "every attempt: no connection")
	assert.Positive(t, r.Redrive.Attempts)

	target := newFakeTarget(t, "127.0.0.1", http.StatusInternalServerError, "")
	setURL("http://" + target.addr + "/transfers")
	code, out, errOut = runTTY(t, w.dsn, "", "resolve", "--file", file, "--retry-for", "2s", "--operator", "alice", "-o", "wide")
	require.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Positive(t, target.hits.Load())
	assert.Contains(t, out, "1 error; 1 sent to their class's service (1 with no usable answer: outcome unknown)")
	assert.Contains(t, out, "1 sent to their service with no usable answer have an unknown outcome")
	assert.NotContains(t, out, "wrote nothing", "the meaning does not contradict the unknown outcome")
	d = lastRun()
	assert.EqualValues(t, 1, d["redriven"])
	assert.EqualValues(t, 1, d["redrive_unknown"])
	assert.EqualValues(t, 1, d["unknown"])
	assert.EqualValues(t, 0, d["not_sent"])

	// One operation alone: its meaning row says the same.
	code, out, errOut = runTTY(t, w.dsn, "", "resolve", "--tenant", "t1", "--op", "op-1", "--class", "demo.transfer_app",
		"--payload", `{"from":"a","to":"b","amount":100,"currency":"EUR"}`, "--retry-for", "1s", "--operator", "alice", "-o", "wide")
	require.Equal(t, cmdutil.ExitInvalid, code, errOut)
	assert.Contains(t, out, "the outcome is unknown (resolve it again)")
	assert.False(t, strings.Contains(out, "wrote nothing"), out)
}
