package idem_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// BenchmarkExecute compares the executor with the bare effect: the demo
// transfer (one posting, two balances) in its own transaction without any
// inbox. Target: applied >= 0.7x baseline throughput. Run with
//
//	go test ./idem -run '^$' -bench BenchmarkExecute -benchtime 3s
func BenchmarkExecute(b *testing.B) {
	// The operator's pool runs the executor; the bare effect is called as
	// the superuser (it is executable by the schema owner only).
	pool, dsn := dbtest.NewPool(b, 9)
	admin := dbtest.PoolAs(b, dsn, dbtest.Superuser, 9)
	ctx := context.Background()
	var seq atomic.Int64
	// Accounts spread over many tenants so that balance rows are not one hot
	// spot shared by every connection (that would measure lock waits).
	payload := func(n int64) []byte {
		return []byte(fmt.Sprintf(`{"from":"a%d","to":"b%d","amount":%d,"currency":"EUR"}`, n%64, n%64, 1+n%1000))
	}
	tenant := func(n int64) string { return fmt.Sprintf("bench-%d", n%64) }

	for _, conns := range []int{1, 8} {
		b.Run(fmt.Sprintf("baseline_bare_effect/conns=%d", conns), func(b *testing.B) {
			// One statement is its own transaction: the same round trips as
			// idem.Execute on a pooled connection.
			dbtest.Parallel(b, admin, conns, func(c *pgxpool.Conn) error {
				n := seq.Add(1)
				_, err := c.Exec(ctx, "SELECT demo.transfer_effect($1, $2, $3)", tenant(n), fmt.Sprintf("base-%d", n), payload(n))
				return err
			})
		})
		b.Run(fmt.Sprintf("applied/conns=%d", conns), func(b *testing.B) {
			dbtest.Parallel(b, pool, conns, func(c *pgxpool.Conn) error {
				n := seq.Add(1)
				res, err := idem.Execute(ctx, c, idem.Command{
					Identity: idem.Identity{TenantID: tenant(n), OperationID: fmt.Sprintf("op-%d", n)},
					Class:    "demo.transfer", Payload: payload(n),
				})
				if err == nil && res.Outcome != idem.Applied {
					err = fmt.Errorf("outcome %s", res.Outcome)
				}
				return err
			})
		})
		b.Run(fmt.Sprintf("already_applied/conns=%d", conns), func(b *testing.B) {
			// Replays of identities applied above.
			dbtest.Parallel(b, pool, conns, func(c *pgxpool.Conn) error {
				n := 1 + seq.Add(1)%64
				_, err := idem.Execute(ctx, c, idem.Command{
					Identity: idem.Identity{TenantID: "replay", OperationID: fmt.Sprintf("op-%d", n)},
					Class:    "demo.transfer", Payload: payload(n),
				})
				return err
			})
		})
	}
}

// BenchmarkTrustBoundaryCost prices what the database's own enforcement adds
// to the executor, in the same run: the schema as installed (every function
// SECURITY DEFINER with a pinned search_path, the payload hash recomputed)
// against a copy of the same database where every idem function is made an
// invoker function without a pinned search_path and the hash check is cut
// out. Both run as the superuser (the stripped copy grants nothing), on 1 and
// 8 connections, for new operations and for replays.
//
//	go test ./idem -run '^$' -bench BenchmarkTrustBoundaryCost -benchtime 3s
func BenchmarkTrustBoundaryCost(b *testing.B) {
	ctx := context.Background()
	enforced := dbtest.As(dbtest.NewDatabase(b), dbtest.Superuser)
	stripped := dbtest.As(dbtest.NewDatabase(b), dbtest.Superuser)
	dbtest.Admin(b, stripped, `DO $$
		DECLARE f record; def text;
		BEGIN
		    FOR f IN SELECT p.oid FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'idem' LOOP
		        EXECUTE format('ALTER FUNCTION %s SECURITY INVOKER RESET search_path', f.oid::regprocedure);
		    END LOOP;
		    def := pg_get_functiondef('idem.check_request(text,text,text,text,text,jsonb)'::regprocedure);
		    def := regexp_replace(def, 'IF p_payload_hash <> .*?END IF;', '', 's');
		    def := replace(def, 'OR p_payload_hash <> ''jcs-sha256:'' || encode(sha256(convert_to(p_payload, ''UTF8'')), ''hex'')', '');
		    EXECUTE def;
		    def := pg_get_functiondef('idem.execute(text,text,text,text,text,jsonb)'::regprocedure);
		    def := regexp_replace(def, 'IF payload_hash <> .*?END IF;', '', 's');
		    def := replace(def, 'AND payload_hash = ''jcs-sha256:'' || encode(sha256(convert_to(payload, ''UTF8'')), ''hex'')', '');
		    EXECUTE def;
		END $$`)
	var seq atomic.Int64
	payload := func(n int64) []byte {
		return []byte(fmt.Sprintf(`{"from":"a%d","to":"b%d","amount":%d,"currency":"EUR"}`, n%64, n%64, 1+n%1000))
	}
	for _, db := range []struct{ name, dsn string }{{"enforced", enforced}, {"stripped", stripped}} {
		pool := dbtest.PoolAs(b, db.dsn, dbtest.Superuser, 9)
		for _, conns := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/applied/conns=%d", db.name, conns), func(b *testing.B) {
				dbtest.Parallel(b, pool, conns, func(c *pgxpool.Conn) error {
					n := seq.Add(1)
					_, err := idem.Execute(ctx, c, idem.Command{
						Identity: idem.Identity{TenantID: fmt.Sprintf("t-%d", n%64), OperationID: fmt.Sprintf("op-%d", n)},
						Class:    "demo.transfer", Payload: payload(n)})
					return err
				})
			})
			b.Run(fmt.Sprintf("%s/already_applied/conns=%d", db.name, conns), func(b *testing.B) {
				dbtest.Parallel(b, pool, conns, func(c *pgxpool.Conn) error {
					n := 1 + seq.Add(1)%64
					_, err := idem.Execute(ctx, c, idem.Command{
						Identity: idem.Identity{TenantID: "replay", OperationID: fmt.Sprintf("op-%d", n)},
						Class:    "demo.transfer", Payload: payload(n)})
					return err
				})
			})
		}
	}
}
