package redrive_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/redrive"
)

// A service that answers 503 with a Retry-After beyond --retry-for asked to
// wait: the line is pending (exit 6) and says when to run it again, at once,
// without waiting out the budget; nothing is recorded.
func TestRedriveRetryAfterBeyondTheBudgetIsPending(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 4)
	var requests atomic.Int32
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Retry-After", "60")
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	t.Cleanup(svc.Close)
	_, err := redrive.Set(context.Background(), pool, "demo.transfer_app",
		&redrive.Config{Kind: redrive.KindHTTP, URL: svc.URL + "/transfers", TimeoutSeconds: 5}, true, "alice")
	require.NoError(t, err)
	w := &redriveWorld{t: t, pool: pool, dsn: dsn}

	began := time.Now()
	code, got, errOut := w.resolve([]string{appLine("t1", "op-1", 100)}, "--retry-for", "20s")
	assert.Less(t, time.Since(began), 10*time.Second, "the run does not wait out a budget the service already ruled out")
	require.Equal(t, cmdutil.ExitPending, code, errOut)
	r := got["t1/op-1"]
	assert.Equal(t, "pending", r.Outcome)
	assert.Nil(t, r.Error, "nothing failed")
	assert.Contains(t, r.Note, "asked to wait 1m0s (Retry-After), beyond --retry-for 20s")
	assert.Contains(t, r.Note, "run it again after ")
	assert.NotContains(t, r.Note, "no usable answer")
	assert.Equal(t, int32(1), requests.Load(), "sent once")
	p, c, _ := w.ledger("t1", "op-1")
	assert.Equal(t, [2]int{0, 0}, [2]int{p, c})
}
