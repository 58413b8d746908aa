package resolve_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/db"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// rsvLineAt is rsvLine with its first attempt's time.
func rsvLineAt(tenant, op string, amount int, first time.Time) string {
	return strings.TrimSuffix(rsvLine(tenant, op, amount), "}") + fmt.Sprintf(`,"first_attempt_at":%q}`, first.UTC().Format(time.RFC3339Nano))
}

// A real asynchronous standby promoted while a service writes to its
// primary: on the new primary, every operation the old one acknowledged is
// either there (already_applied, no note) or absent and applied again with
// the note "may have been acknowledged and lost in the failover at T"; an
// absent line whose first attempt came after the switch gets no note, one
// without first_attempt_at gets it. doctor names the promotion.
func TestResolveNotesFailover(t *testing.T) {
	t.Parallel()
	super, host, port := startPrimaryAndStandby(t)
	ctx := context.Background()
	u, err := url.Parse(super)
	require.NoError(t, err)
	u.Host = fmt.Sprintf("%s:%d", host, port)
	promoted := u.String()
	require.Eventually(t, func() bool {
		conn, err := pgx.Connect(ctx, promoted)
		if err != nil {
			return false
		}
		defer conn.Close(ctx)
		var n int
		return conn.QueryRow(ctx, "SELECT count(*) FROM idem.op_class").Scan(&n) == nil && n > 0
	}, 60*time.Second, 200*time.Millisecond, "standby never caught up")

	// The service writes to the old primary; the standby is promoted meanwhile.
	app, err := db.Open(ctx, dbtest.As(super, dbtest.App), db.Options{MaxConns: 4})
	require.NoError(t, err)
	defer app.Close()
	before := time.Now().Add(-time.Minute)
	var acked sync.Map
	var n atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				op := fmt.Sprintf("load-%d-%d", w, i)
				res, err := idem.Execute(ctx, app, idem.Command{Identity: idem.Identity{TenantID: "acme", OperationID: op},
					Class: "demo.transfer", Payload: []byte(fmt.Sprintf(`{"from":"alice","to":"bob","amount":%d,"currency":"EUR"}`, i+1))})
				if err == nil && res.Outcome == idem.Applied {
					acked.Store(op, i+1)
					n.Add(1)
				}
			}
		}(w)
	}
	require.Eventually(t, func() bool { return n.Load() > 200 }, 60*time.Second, 50*time.Millisecond)
	promote(t, promoted)
	time.Sleep(300 * time.Millisecond) // the old primary acknowledges more, which the new one never sees
	close(stop)
	wg.Wait()
	after := time.Now().Add(time.Minute)

	newPrimary := dbtest.As(promoted, dbtest.Operator)
	var lines []string
	acked.Range(func(k, v any) bool {
		lines = append(lines, rsvLineAt("acme", k.(string), v.(int), before))
		return true
	})
	lines = append(lines, rsvLineAt("acme", "after-switch", 1, after), rsvLine("acme", "no-time", 2))
	code, out, errOut := run(t, newPrimary, "", "resolve", "--file", rsvFile(t, lines...), "-o", "json")
	require.Contains(t, []int{cmdutil.ExitOK}, code, errOut)
	rows := rsvJSON(t, out)
	require.Len(t, rows, len(lines))
	lost := 0
	for _, row := range rows {
		op, note := row["operation_id"].(string), fmt.Sprint(row["note"])
		switch {
		case op == "after-switch":
			assert.Equal(t, "applied", row["outcome"])
			assert.NotContains(t, note, "failover", "a first attempt after the switch: %v", row)
		case op == "no-time":
			assert.Equal(t, "applied", row["outcome"])
			assert.Contains(t, note, "may have been acknowledged and lost in the failover at ", "%v", row)
			assert.Contains(t, note, "no first_attempt_at")
		case row["outcome"] == "already_applied":
			assert.NotContains(t, note, "failover", "%v", row)
		default:
			lost++
			assert.Equal(t, "applied", row["outcome"], "%v", row)
			assert.Contains(t, note, "may have been acknowledged and lost in the failover at ", "%v", row)
			assert.Contains(t, note, "its SQL effect was lost with it", "%v", row)
		}
	}
	t.Logf("%d acknowledged operations, %d lost in the failover", n.Load(), lost)
	require.Positive(t, lost, "the old primary acknowledged operations the promoted standby never received")

	_, _, checks := doctorLines(t, newPrimary)
	assert.Contains(t, checks["failover"]["detail"], "promoted at ", "%v", checks["failover"])
	assert.Contains(t, checks["failover"]["detail"], "(timeline 2)")
}

// promote promotes the standby at dsn and waits until it accepts writes.
// pg_promote does not wait here: a statement on a hot standby that waits
// while the primary's cleanup records replay is cancelled by the conflict
// (SQLSTATE 40001), so the signal is sent again until it lands and the end
// of recovery is polled.
func promote(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	var last error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			last = err
			continue
		}
		var recovering bool
		err = conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering)
		if err == nil && !recovering {
			conn.Close(ctx)
			return
		}
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT pg_promote(false)")
		}
		if err != nil {
			last = err
		}
		conn.Close(ctx)
	}
	t.Fatalf("the standby was never promoted in 60s; last error: %v", last)
}
