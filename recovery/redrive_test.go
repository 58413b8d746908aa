package recovery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/demo"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/recovery"
	"github.com/idemctl/idemctl/redrive"
)

// A re-drive the service answers 409 (a request with this key is in flight)
// while the first attempt is still running: the first attempt records the
// identity, so resolve answers already_applied with the first attempt's
// response and says the first attempt won, whether that attempt had opened
// its transaction before the re-drive was sent or only after (still queued
// in the service when the 409 went out).
func TestRedrive409FirstAttemptWins(t *testing.T) {
	t.Parallel()
	for _, claimed := range []string{"before the send", "after the send"} {
		t.Run(claimed, func(t *testing.T) {
			t.Parallel()
			b := setup(t, 4)
			answered409 := make(chan struct{}, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusConflict)
				_, _ = w.Write([]byte(`{"error":"a request with this key is in flight"}`))
				select {
				case answered409 <- struct{}{}:
				default:
				}
			}))
			t.Cleanup(srv.Close)
			_, err := redrive.Set(b.ctx, b.pool, demo.AppClass, &redrive.Config{Kind: redrive.KindHTTP, URL: srv.URL + "/transfers",
				TimeoutSeconds: 5}, true, "alice")
			require.NoError(t, err)

			// The first attempt, as the service runs it: claim, effect, commit.
			payload := `{"amount":100,"currency":"EUR","from":"a","to":"b"}`
			cmd := idem.Command{Identity: idem.Identity{TenantID: "t1", OperationID: "op-1"}, Class: demo.AppClass, Payload: []byte(payload)}
			inTx, release := make(chan struct{}), make(chan struct{})
			first := make(chan idem.Result, 1)
			go func() {
				if claimed == "after the send" {
					<-release
				}
				res, err := idem.ExecuteFunc(context.Background(), b.app, cmd, func(ctx context.Context, tx pgx.Tx) (json.RawMessage, error) {
					close(inTx)
					<-release
					var posting json.RawMessage
					err := tx.QueryRow(ctx, "SELECT demo.transfer_effect($1, $2, $3::jsonb)", "t1", "op-1", payload).Scan(&posting)
					return posting, err
				})
				assert.NoError(t, err)
				first <- res
			}()
			if claimed == "before the send" {
				<-inTx
			}

			type answer struct {
				res []recovery.Result
				err error
			}
			done := make(chan answer, 1)
			go func() {
				_, res, err := b.resolve(t, recovery.Config{},
					fmt.Sprintf(`{"tenant":"t1","operation_id":"op-1","class":%q,"payload":%s}`, demo.AppClass, payload))
				done <- answer{res, err}
			}()
			select {
			case <-answered409:
			case <-time.After(20 * time.Second):
				t.Fatal("resolve did not re-drive")
			}
			close(release)
			firstRes := <-first
			require.Equal(t, idem.Applied, firstRes.Outcome)

			got := <-done
			require.NoError(t, got.err)
			require.Len(t, got.res, 1)
			r := got.res[0]
			assert.Equal(t, recovery.AlreadyApplied, r.Outcome, "%+v", r)
			assert.JSONEq(t, string(firstRes.Response), string(r.Response), "the first attempt's response")
			assert.Contains(t, r.Note, "the first attempt won")
			require.NotNil(t, r.Redrive)
			assert.Equal(t, 1, r.Redrive.Attempts)
			assert.Equal(t, "already_applied", r.Redrive.Verified)
			assert.Equal(t, 1, b.count(t, "SELECT count(*) FROM demo.posting WHERE tenant_id = 't1' AND operation_id = 'op-1'"))
		})
	}
}
