package idem_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// BenchmarkEffectCheckCost prices the check made before every call of an
// effect, in server time: three fresh databases in one run, one as installed
// ("checked": idem.execute checks the effect in the statement that reads its
// class), one whose idem.execute has that part cut out and calls the effect
// through idem.call_effect unchecked ("unchecked"), and one whose idem.execute
// leaves every call to idem.run_effect, which checks the effect in a
// statement of its own first, as the executor did before ("statement"). Each
// is given 5,000 new operations of demo.transfer as the app login with
// track_functions = all; it reports idem.execute's time per call without the
// effect's from pg_stat_user_functions (the executor's own time); the check
// is the difference with "unchecked". It fails when the installed executor
// left the demo effect to idem.run_effect (its statement must accept a
// well-formed effect). b.N is ignored.
//
//	go test ./idem -run '^$' -bench BenchmarkEffectCheckCost -benchtime 1x -count 3
func BenchmarkEffectCheckCost(b *testing.B) {
	const calls = 5000
	ctx := context.Background()
	checked := dbtest.NewDatabase(b)
	unchecked := dbtest.NewDatabase(b)
	statement := dbtest.NewDatabase(b)
	for _, v := range []struct{ dsn, check string }{{unchecked, "true"}, {statement, "false"}} {
		dbtest.Admin(b, v.dsn, `SET ROLE idem_owner; DO $$
			DECLARE def text := pg_get_functiondef('idem.execute(text,text,text,text,text,jsonb)'::regprocedure);
			BEGIN
			    IF def !~ '/\* effect check \*/.*/\* end effect check \*/' THEN
			        RAISE EXCEPTION 'idem.execute has no marked effect check';
			    END IF;
			    EXECUTE regexp_replace(def, '/\* effect check \*/.*/\* end effect check \*/', '`+v.check+`', 's');
			END $$`)
	}
	type perCall struct {
		own  float64 // idem.execute without the effect
		slow int64   // calls of idem.run_effect
	}
	measure := func(dsn, name string) perCall {
		dbtest.Admin(b, dsn, "ALTER DATABASE "+name+" SET track_functions = 'all'")
		pool := dbtest.PoolAs(b, dsn, dbtest.App, 1)
		for i := 0; i < calls; i++ {
			payload := fmt.Sprintf(`{"from":"a%d","to":"b%d","amount":%d,"currency":"EUR"}`, i%64, i%64, 1+i%1000)
			if _, err := idem.Execute(ctx, pool, idem.Command{
				Identity: idem.Identity{TenantID: fmt.Sprintf("t-%d", i%64), OperationID: fmt.Sprintf("op-%d", i)},
				Class:    "demo.transfer", Payload: []byte(payload)}); err != nil {
				b.Fatal(err)
			}
		}
		pool.Close() // a backend's function statistics are flushed when it exits
		admin := dbtest.PoolAs(b, dsn, dbtest.Superuser, 1)
		var out perCall
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			var n int64
			if _, err := admin.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
				b.Fatal(err)
			}
			if err := admin.QueryRow(ctx, `SELECT e.calls, (e.total_time - f.total_time) * 1000 / e.calls,
				       (SELECT coalesce(sum(s.calls), 0) FROM pg_stat_user_functions s WHERE s.schemaname = 'idem' AND s.funcname = 'run_effect')
				FROM pg_stat_user_functions e, pg_stat_user_functions f
				WHERE e.schemaname = 'idem' AND e.funcname = 'execute'
				  AND f.schemaname = 'demo' AND f.funcname = 'transfer_effect'`).
				Scan(&n, &out.own, &out.slow); err == nil && n >= calls {
				return out
			}
		}
		b.Fatalf("%s: no function statistics for %d calls", name, calls)
		return out
	}
	for i := 0; i < b.N; i++ {
		u := measure(unchecked, dbName(unchecked))
		c := measure(checked, dbName(checked))
		s := measure(statement, dbName(statement))
		if c.slow != 0 {
			b.Fatalf("idem.execute's check declined the demo effect %d times (idem.run_effect decided)", c.slow)
		}
		if u.slow != 0 || s.slow != calls {
			b.Fatalf("the variants did not take their path: unchecked %d, statement %d calls of idem.run_effect", u.slow, s.slow)
		}
		b.ReportMetric(u.own, "unchecked_own_us/call")
		b.ReportMetric(c.own, "checked_own_us/call")
		b.ReportMetric(s.own, "statement_own_us/call")
		b.ReportMetric(c.own-u.own, "check_us/call")
		b.ReportMetric(s.own-u.own, "statement_check_us/call")
	}
}

func dbName(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		panic(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}
