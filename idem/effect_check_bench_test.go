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

// BenchmarkEffectCheckCost prices the check idem.run_effect makes before
// every call of an effect, in server time: three fresh databases in one run,
// one as installed ("checked": the inline statement), one whose
// idem.run_effect calls the effect without any check ("unchecked") and one
// with the previous dispatcher, which called idem.effect_problem before
// every call ("nested"), each given 5,000 new operations of demo.transfer as
// the app login with track_functions = all. It reports the mean time per
// call of idem.execute and idem.run_effect's time without the effect's from
// pg_stat_user_functions; the check is the difference. It fails when the
// installed dispatcher fell back to idem.effect_problem for the demo effect
// (the inline statement must accept a well-formed effect). b.N is ignored.
//
//	go test ./idem -run '^$' -bench BenchmarkEffectCheckCost -benchtime 1x -count 3
func BenchmarkEffectCheckCost(b *testing.B) {
	const calls = 5000
	ctx := context.Background()
	checked := dbtest.NewDatabase(b)
	unchecked := dbtest.NewDatabase(b)
	dbtest.Admin(b, unchecked, `SET ROLE idem_owner; CREATE OR REPLACE FUNCTION idem.run_effect(p_op_class text, p_tenant_id text, p_operation_id text, p_payload jsonb, p_effect oid)
		RETURNS jsonb LANGUAGE plpgsql AS $body$
		BEGIN
		    IF p_op_class = 'demo.transfer' THEN RETURN demo.transfer_effect(p_tenant_id, p_operation_id, p_payload); END IF;
		    RAISE EXCEPTION 'class % has no SQL effect', p_op_class USING ERRCODE = 'IX004';
		END $body$`)
	nested := dbtest.NewDatabase(b)
	dbtest.Admin(b, nested, `SET ROLE idem_owner; CREATE OR REPLACE FUNCTION idem.run_effect(p_op_class text, p_tenant_id text, p_operation_id text, p_payload jsonb, p_effect oid)
		RETURNS jsonb LANGUAGE plpgsql AS $body$
		DECLARE
		    v_problem text;
		BEGIN
		    IF p_op_class = 'demo.transfer' THEN
		        v_problem := idem.effect_problem('demo.transfer_effect(text,text,jsonb)'::pg_catalog.regprocedure, 'demo'::pg_catalog.regnamespace, 'transfer_effect');
		        IF v_problem IS NOT NULL THEN RAISE EXCEPTION 'effect: %', v_problem USING ERRCODE = 'IX016'; END IF;
		        RETURN demo.transfer_effect(p_tenant_id, p_operation_id, p_payload);
		    END IF;
		    RAISE EXCEPTION 'class % has no SQL effect', p_op_class USING ERRCODE = 'IX004';
		END $body$`)
	type perCall struct {
		execute, dispatch float64
		slow              int64 // calls of idem.effect_problem
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
			// run_effect's time without the effect's: the dispatch and the check.
			if err := admin.QueryRow(ctx, `SELECT e.calls, e.total_time * 1000 / e.calls, (d.total_time - f.total_time) * 1000 / d.calls,
				       (SELECT coalesce(sum(s.calls), 0) FROM pg_stat_user_functions s WHERE s.schemaname = 'idem' AND s.funcname = 'effect_problem')
				FROM pg_stat_user_functions e, pg_stat_user_functions d, pg_stat_user_functions f
				WHERE e.schemaname = 'idem' AND e.funcname = 'execute' AND d.schemaname = 'idem' AND d.funcname = 'run_effect'
				  AND f.schemaname = 'demo' AND f.funcname = 'transfer_effect'`).
				Scan(&n, &out.execute, &out.dispatch, &out.slow); err == nil && n >= calls {
				return out
			}
		}
		b.Fatalf("%s: no function statistics for %d calls", name, calls)
		return out
	}
	for i := 0; i < b.N; i++ {
		u := measure(unchecked, dbName(unchecked))
		c := measure(checked, dbName(checked))
		n := measure(nested, dbName(nested))
		if c.slow != 0 {
			b.Fatalf("the inline check refused the demo effect %d times (idem.effect_problem decided)", c.slow)
		}
		b.ReportMetric(u.execute, "unchecked_execute_us/call")
		b.ReportMetric(c.execute, "checked_execute_us/call")
		b.ReportMetric(u.dispatch, "unchecked_dispatch_us/call")
		b.ReportMetric(c.dispatch, "checked_dispatch_us/call")
		b.ReportMetric(c.dispatch-u.dispatch, "check_us/call")
		b.ReportMetric(n.dispatch-u.dispatch, "nested_check_us/call")
	}
}

func dbName(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		panic(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}
