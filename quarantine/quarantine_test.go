package quarantine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
)

type bundle struct {
	ctx  context.Context
	pool *pgxpool.Pool // an operator's (alice)
	dsn  string
}

func setup(t *testing.T, maxConns int32) bundle {
	t.Helper()
	pool, dsn := dbtest.NewPool(t, maxConns)
	return bundle{ctx: context.Background(), pool: pool, dsn: dsn}
}

func transferPayload(amount int) string {
	return fmt.Sprintf(`{"from":"alice","to":"bob","amount":%d,"currency":"EUR"}`, amount)
}

func cmd(tenant, op, class, payload string) idem.Command {
	return idem.Command{Identity: idem.Identity{TenantID: tenant, OperationID: op}, Class: class, Payload: []byte(payload)}
}

func (b bundle) exec(t *testing.T, c idem.Command) idem.Result {
	t.Helper()
	res, err := idem.Execute(b.ctx, b.pool, c)
	require.NoError(t, err)
	return res
}

// conflict applies payload `stored` and then conflicts with `incoming`, returning
// the original result and the quarantine id.
func (b bundle) conflict(t *testing.T, tenant, op, stored, incoming string) (idem.Result, int64) {
	t.Helper()
	first := b.exec(t, cmd(tenant, op, "demo.transfer", stored))
	require.Equal(t, idem.Applied, first.Outcome)
	res := b.exec(t, cmd(tenant, op, "demo.transfer", incoming))
	require.Equal(t, idem.Conflict, res.Outcome)
	require.NotZero(t, res.QuarantineID)
	return first, res.QuarantineID
}

func (b bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(b.ctx, sql, args...).Scan(&n))
	return n
}

// snapshot is everything a refused request must leave untouched.
type snapshot struct {
	Inbox, Quarantine, Decided, Audit, Postings int
	Occurrences                                 int
}

func (b bundle) snapshot(t *testing.T) snapshot {
	return snapshot{
		Inbox:       b.count(t, "SELECT count(*) FROM idem.inbox"),
		Quarantine:  b.count(t, "SELECT count(*) FROM idem.quarantine"),
		Decided:     b.count(t, "SELECT count(*) FROM idem.quarantine WHERE status <> 'open'"),
		Audit:       b.count(t, "SELECT count(*) FROM idem.audit"),
		Postings:    b.count(t, "SELECT count(*) FROM demo.posting"),
		Occurrences: b.count(t, "SELECT coalesce(sum(occurrences), 0) FROM idem.quarantine"),
	}
}

// registerAnyClass registers test.any, whose SQL effect accepts any payload,
// so that payloads of every shape can conflict.
func (b bundle) registerAnyClass(t *testing.T) {
	t.Helper()
	dbtest.RegisterEffect(t, b.dsn, "test.any", "forever", "any_effect", `SELECT jsonb_build_object('seen', p)`)
}

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func TestJSONDiff(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	// idem.json_diff is internal (idem.record_conflict calls it): the test
	// calls it as the superuser.
	admin := dbtest.PoolAs(t, b.dsn, dbtest.Superuser, 2)
	tests := []struct {
		name             string
		stored, incoming string
		want             string
	}{
		{"equal", `{"a":1,"b":[1,{"c":2}]}`, `{"b":[1,{"c":2}],"a":1}`, `[]`},
		{"scalar root", `1`, `2`, `[{"path":"","change":"changed","stored":1,"incoming":2}]`},
		{"root type", `[]`, `{}`, `[{"path":"","change":"type_changed","stored":[],"incoming":{}}]`},
		{"changed member", `{"a":1}`, `{"a":2}`, `[{"path":"/a","change":"changed","stored":1,"incoming":2}]`},
		{"added member", `{"a":1}`, `{"a":1,"b":{"c":[1]}}`,
			`[{"path":"/b","change":"added","stored":null,"incoming":{"c":[1]}}]`},
		{"removed member", `{"a":1,"b":"x"}`, `{"a":1}`, `[{"path":"/b","change":"removed","stored":"x","incoming":null}]`},
		{"real null added vs absent", `{}`, `{"a":null}`, `[{"path":"/a","change":"added","stored":null,"incoming":null}]`},
		{"null to value", `{"a":null}`, `{"a":0}`, `[{"path":"/a","change":"type_changed","stored":null,"incoming":0}]`},
		{"number to string", `{"a":1}`, `{"a":"1"}`, `[{"path":"/a","change":"type_changed","stored":1,"incoming":"1"}]`},
		{"object to array", `{"a":{"x":1}}`, `{"a":[1]}`, `[{"path":"/a","change":"type_changed","stored":{"x":1},"incoming":[1]}]`},
		{"nested", `{"a":{"b":{"c":1,"d":true}}}`, `{"a":{"b":{"c":2,"d":true}}}`,
			`[{"path":"/a/b/c","change":"changed","stored":1,"incoming":2}]`},
		{"array element", `[1,2,3]`, `[1,5,3]`, `[{"path":"/1","change":"changed","stored":2,"incoming":5}]`},
		{"array longer", `[1]`, `[1,2,3]`,
			`[{"path":"/1","change":"added","stored":null,"incoming":2},{"path":"/2","change":"added","stored":null,"incoming":3}]`},
		{"array shorter", `{"l":[1,2,3]}`, `{"l":[1]}`,
			`[{"path":"/l/1","change":"removed","stored":2,"incoming":null},{"path":"/l/2","change":"removed","stored":3,"incoming":null}]`},
		{"array index order", `[0,1,2,3,4,5,6,7,8,9,10,11]`, `[0,1,9,3,4,5,6,7,8,9,10,12]`,
			`[{"path":"/2","change":"changed","stored":2,"incoming":9},{"path":"/11","change":"changed","stored":11,"incoming":12}]`},
		{"objects in arrays", `{"items":[{"sku":"a","qty":1},{"sku":"b","qty":2}]}`, `{"items":[{"sku":"a","qty":1},{"sku":"b","qty":3,"gift":true}]}`,
			`[{"path":"/items/1/gift","change":"added","stored":null,"incoming":true},{"path":"/items/1/qty","change":"changed","stored":2,"incoming":3}]`},
		{"pointer escapes", `{"a/b":1,"m~n":1,"~1":1}`, `{"a/b":2,"m~n":2,"~1":2}`,
			`[{"path":"/a~1b","change":"changed","stored":1,"incoming":2},{"path":"/m~0n","change":"changed","stored":1,"incoming":2},{"path":"/~01","change":"changed","stored":1,"incoming":2}]`},
		{"empty key", `{"":1}`, `{"":2}`, `[{"path":"/","change":"changed","stored":1,"incoming":2}]`},
		{"unicode key", `{"montant€":1}`, `{"montant€":2}`, `[{"path":"/montant€","change":"changed","stored":1,"incoming":2}]`},
	}
	for _, tc := range tests {
		var got string
		require.NoError(t, admin.QueryRow(b.ctx, "SELECT idem.json_diff($1::jsonb, $2::jsonb)::text", tc.stored, tc.incoming).Scan(&got), tc.name)
		assert.JSONEq(t, tc.want, got, tc.name)
	}
}

func TestConflictEvidence(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	stored := `{"from":"alice","to":"bob","amount":500,"currency":"EUR",
		"meta":{"tags":["a","b","c"],"ref":{"x":1}},"note":"first","a/b":1}`
	incoming := `{"from":"alice","to":"bob","amount":501,"currency":"EUR",
		"meta":{"tags":["a","B"],"ref":{"x":"1"},"new":{"k":[1]}},"a/b":1,"extra":null}`
	first := b.exec(t, cmd("t1", "op-1", "demo.transfer", stored))
	require.Equal(t, idem.Applied, first.Outcome)
	c := cmd("t1", "op-1", "demo.transfer", incoming)
	c.Transport = json.RawMessage(`{"topic":"payments","partition":3,"offset":1207}`)
	res := b.exec(t, c)
	require.Equal(t, idem.Conflict, res.Outcome)

	rec, err := quarantine.Show(b.ctx, b.pool, res.QuarantineID)
	require.NoError(t, err)
	assert.Equal(t, "t1", rec.Tenant)
	assert.Equal(t, "op-1", rec.OperationID)
	assert.Equal(t, "demo.transfer", rec.Class)
	assert.Equal(t, "demo.transfer", rec.IncomingClass)
	assert.Equal(t, quarantine.StatusOpen, rec.Status)
	assert.Equal(t, int64(1), rec.Occurrences)
	assert.Equal(t, first.Hash, rec.StoredHash)
	assert.Equal(t, res.Hash, rec.IncomingHash)
	assert.JSONEq(t, stored, string(rec.StoredPayload))
	assert.JSONEq(t, incoming, string(rec.IncomingPayload))
	assert.JSONEq(t, string(first.Response), string(rec.StoredResponse))
	assert.JSONEq(t, `{"topic":"payments","partition":3,"offset":1207}`, string(rec.IncomingTransport))
	assert.Equal(t, "idemctl", rec.Detected.ApplicationName)
	assert.Equal(t, string(dbtest.Operator), rec.Detected.DBUser)
	assert.Empty(t, rec.Detected.Operator)
	assert.Nil(t, rec.Decision)
	assert.False(t, rec.FirstSeen.IsZero())
	assert.Equal(t, rec.FirstSeen, rec.LastSeen)

	diff, err := json.Marshal(rec.Diff)
	require.NoError(t, err)
	assert.JSONEq(t, `[
		{"path":"/amount","change":"changed","stored":500,"incoming":501},
		{"path":"/extra","change":"added","stored":null,"incoming":null},
		{"path":"/meta/new","change":"added","stored":null,"incoming":{"k":[1]}},
		{"path":"/meta/ref/x","change":"type_changed","stored":1,"incoming":"1"},
		{"path":"/meta/tags/1","change":"changed","stored":"b","incoming":"B"},
		{"path":"/meta/tags/2","change":"removed","stored":"c","incoming":null},
		{"path":"/note","change":"removed","stored":"first","incoming":null}
	]`, string(diff))
}

func TestConflictDetectedByOperator(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.exec(t, cmd("t1", "op-1", "demo.transfer", transferPayload(1)))
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	_, err = tx.Exec(b.ctx, "SELECT set_config('idem.operator', 'alice', true)")
	require.NoError(t, err)
	res, err := idem.Execute(b.ctx, tx, cmd("t1", "op-1", "demo.transfer", transferPayload(2)))
	require.NoError(t, err)
	require.Equal(t, idem.Conflict, res.Outcome)
	require.NoError(t, tx.Commit(b.ctx))
	rec, err := quarantine.Show(b.ctx, b.pool, res.QuarantineID)
	require.NoError(t, err)
	assert.Equal(t, "alice", rec.Detected.Operator)
}

// A storm of the same conflicting retry, from concurrent sessions, is one record.
func TestIdenticalConflictsCountOnOneRecord(t *testing.T) {
	t.Parallel()
	b := setup(t, 8)
	_, qid := b.conflict(t, "t1", "op-1", transferPayload(500), transferPayload(501))
	before, err := quarantine.Show(b.ctx, b.pool, qid)
	require.NoError(t, err)

	// Eight sessions always in flight on the one record, 200 requests in
	// all: the count is exact or it is not (1,000 took five times as long for
	// the same assertions).
	const workers, each = 8, 25 // 1 + 199 more = 200 in all
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		n := each
		if w == 0 {
			n-- // the conflict above was the first
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				res, err := idem.Execute(b.ctx, b.pool, cmd("t1", "op-1", "demo.transfer", transferPayload(501)))
				if err == nil && (res.Outcome != idem.Conflict || res.QuarantineID != qid || res.Response != nil) {
					err = fmt.Errorf("unexpected result %+v", res)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, 1, b.count(t, "SELECT count(*) FROM idem.quarantine"))
	after, err := quarantine.Show(b.ctx, b.pool, qid)
	require.NoError(t, err)
	assert.Equal(t, int64(workers*each), after.Occurrences)
	assert.Equal(t, before.Diff, after.Diff)
	assert.Equal(t, before.FirstSeen, after.FirstSeen)
	assert.False(t, after.LastSeen.Before(before.LastSeen))
	assert.Equal(t, 1, b.count(t, "SELECT count(*) FROM demo.posting"), "the conflicting payload never ran")
}

func TestEvidenceIsImmutable(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	_, qid := b.conflict(t, "t1", "op-1", transferPayload(500), transferPayload(501))
	before, err := quarantine.Show(b.ctx, b.pool, qid)
	require.NoError(t, err)

	tests := []struct {
		sql  string
		code string // what the schema owner's own script meets
	}{
		{"UPDATE idem.quarantine SET tenant_id = 't2'", "IX102"},
		{"UPDATE idem.quarantine SET operation_id = 'op-2'", "IX102"},
		{"UPDATE idem.quarantine SET op_class = 'other'", "IX102"},
		{"UPDATE idem.quarantine SET incoming_class = 'other'", "IX102"},
		{"UPDATE idem.quarantine SET stored_hash = incoming_hash", "IX102"},
		{"UPDATE idem.quarantine SET incoming_hash = stored_hash", "IX102"},
		{"UPDATE idem.quarantine SET stored_payload = incoming_payload", "IX102"},
		{"UPDATE idem.quarantine SET incoming_payload = stored_payload", "IX102"},
		{"UPDATE idem.quarantine SET stored_response = '{}'", "IX102"},
		{"UPDATE idem.quarantine SET stored_response = NULL", "IX102"},
		{"UPDATE idem.quarantine SET incoming_transport = '{\"x\":1}'", "IX102"},
		{"UPDATE idem.quarantine SET diff = '[]'", "IX102"},
		{"UPDATE idem.quarantine SET holds_on = 'identity'", "IX102"},
		{"UPDATE idem.quarantine SET detected_app = 'x'", "IX102"},
		{"UPDATE idem.quarantine SET detected_user = 'x'", "IX102"},
		{"UPDATE idem.quarantine SET detected_operator = 'x'", "IX102"},
		{"UPDATE idem.quarantine SET first_seen = first_seen - interval '1 day'", "IX102"},
		{"UPDATE idem.quarantine SET occurrences = 0", "IX102"},
		{"UPDATE idem.quarantine SET last_seen = last_seen - interval '1 day'", "IX102"},
		{"UPDATE idem.quarantine SET status = 'open2'", "IX103"},
		{"DELETE FROM idem.quarantine", "IX102"},
		{"TRUNCATE idem.quarantine", "IX102"},
	}
	for _, tc := range tests {
		// An operator may not write the table at all...
		_, err := b.pool.Exec(b.ctx, tc.sql)
		assert.Equal(t, "42501", pgCode(err), "%s: %v", tc.sql, err)
		// ...and the schema owner's own scripts meet the guards.
		err = dbtest.Owner(b.dsn, tc.sql)
		assert.Equal(t, tc.code, pgCode(err), "%s: %v", tc.sql, err)
	}
	after, err := quarantine.Show(b.ctx, b.pool, qid)
	require.NoError(t, err)
	assert.Equal(t, before, after)

	// Decided evidence is just as immutable, and the decision itself too.
	_, err = quarantine.Reject(b.ctx, b.pool, qid, "alice", "fraud attempt")
	require.NoError(t, err)
	for sql, code := range map[string]string{
		"UPDATE idem.quarantine SET incoming_payload = stored_payload":   "IX102",
		"UPDATE idem.quarantine SET decision_reason = 'changed my mind'": "IX103",
		"UPDATE idem.quarantine SET status = 'accepted'":                 "IX103",
		"DELETE FROM idem.quarantine":                                    "IX102",
	} {
		err := dbtest.Owner(b.dsn, sql)
		assert.Equal(t, code, pgCode(err), "%s: %v", sql, err)
	}
}

// Every column of idem.quarantine is guarded: evidence, counter or decision.
// A column added later and left out of the triggers' lists would be mutable.
func TestEveryQuarantineColumnIsGuarded(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	rows, err := b.pool.Query(b.ctx, `
		SELECT a.attname FROM pg_attribute a
		WHERE a.attrelid = 'idem.quarantine'::regclass AND a.attnum > 0 AND NOT a.attisdropped
		  AND NOT EXISTS (
		      SELECT 1 FROM pg_trigger tg
		      WHERE tg.tgrelid = a.attrelid
		        AND tg.tgname IN ('quarantine_evidence_guard', 'quarantine_guard')
		        AND a.attnum = ANY (tg.tgattr))
		ORDER BY a.attname`)
	require.NoError(t, err)
	unguarded, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Empty(t, unguarded, "add these columns to a guard trigger of the code package")
}

func TestRejectBlocksTheConflictWhileTheOriginalStillAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	first, qid := b.conflict(t, "t1", "op-1", transferPayload(500), transferPayload(501))

	rec, err := quarantine.Reject(b.ctx, b.pool, qid, "alice", "amount tampering, ticket PAY-12")
	require.NoError(t, err)
	assert.Equal(t, quarantine.StatusRejected, rec.Status)
	require.NotNil(t, rec.Decision)
	assert.Equal(t, "alice", rec.Decision.By)
	assert.Equal(t, string(dbtest.Operator), rec.Decision.DBUser)
	assert.Equal(t, dbtest.PersonOperator, rec.Decision.Person)
	assert.Equal(t, "amount tampering, ticket PAY-12", rec.Decision.Reason)
	assert.Empty(t, rec.Decision.NewOperationID)
	assert.NotZero(t, rec.Decision.AuditID)

	rows, err := audit.List(b.ctx, b.pool, audit.Filter{Target: fmt.Sprintf("quarantine:%d", qid)})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, rec.Decision.AuditID, rows[0].ID)
	assert.Equal(t, quarantine.ActionReject, rows[0].Action)
	assert.Equal(t, "alice", rows[0].Actor)
	assert.Equal(t, string(dbtest.Operator), rows[0].DBUser)
	assert.JSONEq(t, fmt.Sprintf(`{"quarantine_id":%d,"tenant_id":"t1","operation_id":"op-1","class":"demo.transfer",
		"stored_hash":%q,"incoming_hash":%q,"occurrences":1,"reason":"amount tampering, ticket PAY-12"}`,
		qid, rec.StoredHash, rec.IncomingHash), string(rows[0].Details))

	// The conflicting payload, replayed through idem.execute, never runs and
	// is counted; the claim path refuses a class whose effect is SQL.
	for i := 0; i < 3; i++ {
		res := b.exec(t, cmd("t1", "op-1", "demo.transfer", transferPayload(501)))
		assert.Equal(t, idem.Conflict, res.Outcome)
		assert.Nil(t, res.Response)
		assert.Equal(t, qid, res.QuarantineID)
	}
	ran := false
	app := dbtest.PoolAs(t, b.dsn, dbtest.App, 2)
	_, err = idem.ExecuteFunc(b.ctx, app, cmd("t1", "op-1", "demo.transfer", transferPayload(501)),
		func(context.Context, pgx.Tx) (json.RawMessage, error) { ran = true; return nil, nil })
	assert.ErrorIs(t, err, idem.ErrSQLEffectClass)
	assert.False(t, ran)

	after, err := quarantine.Show(b.ctx, b.pool, qid)
	require.NoError(t, err)
	assert.Equal(t, quarantine.StatusRejected, after.Status, "replays do not reopen a decision")
	assert.Equal(t, int64(4), after.Occurrences, "the refused claim counted nothing")
	assert.Equal(t, 1, b.count(t, "SELECT count(*) FROM demo.posting"))

	// The original payload still answers with the saved response.
	orig := b.exec(t, cmd("t1", "op-1", "demo.transfer", transferPayload(500)))
	assert.Equal(t, idem.AlreadyApplied, orig.Outcome)
	assert.Equal(t, string(first.Response), string(orig.Response))

	// A second decision is refused and writes nothing.
	snap := b.snapshot(t)
	_, err = quarantine.Reject(b.ctx, b.pool, qid, "bob", "again")
	assert.ErrorIs(t, err, quarantine.ErrAlreadyDecided)
	assert.ErrorContains(t, err, "already rejected by alice")
	_, err = quarantine.AcceptAsNew(b.ctx, b.pool, qid, "op-1-rev2", "bob", "it was a revision")
	assert.ErrorIs(t, err, quarantine.ErrAlreadyDecided)
	assert.Equal(t, snap, b.snapshot(t))
}

func TestAcceptAsNew(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	first, qid := b.conflict(t, "t1", "bet-7", transferPayload(500), transferPayload(650))

	acc, err := quarantine.AcceptAsNew(b.ctx, b.pool, qid, "bet-7-settlement-rev2", "carol", "settlement revision, ticket BET-99")
	require.NoError(t, err)
	assert.Equal(t, idem.Applied, acc.Outcome)
	assert.NotEmpty(t, acc.Response)
	assert.Equal(t, quarantine.StatusAccepted, acc.Record.Status)
	require.NotNil(t, acc.Record.Decision)
	assert.Equal(t, "bet-7-settlement-rev2", acc.Record.Decision.NewOperationID)
	assert.Equal(t, "applied", acc.Record.Decision.NewOutcome)
	assert.Equal(t, "carol", acc.Record.Decision.By)

	// The incoming payload ran once, under the new identity, linked back.
	var payload, response, transport json.RawMessage
	var hash string
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT payload, payload_hash, response, transport FROM idem.inbox
		WHERE tenant_id = 't1' AND operation_id = 'bet-7-settlement-rev2'`).Scan(&payload, &hash, &response, &transport))
	assert.JSONEq(t, transferPayload(650), string(payload))
	assert.Equal(t, acc.Record.IncomingHash, hash)
	assert.JSONEq(t, string(acc.Response), string(response))
	assert.JSONEq(t, fmt.Sprintf(`{"accepted_from_quarantine":%d,"original_operation_id":"bet-7","accepted_by":"carol"}`, qid), string(transport))
	assert.Equal(t, 1, b.count(t, "SELECT count(*) FROM demo.posting WHERE operation_id = 'bet-7-settlement-rev2' AND amount = 650"))

	rows, err := audit.List(b.ctx, b.pool, audit.Filter{Action: quarantine.ActionAcceptAsNew})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, acc.Record.Decision.AuditID, rows[0].ID)
	assert.Contains(t, string(rows[0].Details), `"new_operation_id": "bet-7-settlement-rev2"`)
	// Accepted, the record no longer holds the original's body: a purge may
	// remove it like any other.
	assert.Zero(t, b.count(t, "SELECT holds FROM idem.inbox WHERE tenant_id = 't1' AND operation_id = 'bet-7'"))

	// The new operation answers as any other; the old identity still refuses
	// the conflicting payload and answers the original.
	again := b.exec(t, cmd("t1", "bet-7-settlement-rev2", "demo.transfer", transferPayload(650)))
	assert.Equal(t, idem.AlreadyApplied, again.Outcome)
	assert.Equal(t, string(acc.Response), string(again.Response))
	assert.Equal(t, idem.Conflict, b.exec(t, cmd("t1", "bet-7", "demo.transfer", transferPayload(650))).Outcome)
	orig := b.exec(t, cmd("t1", "bet-7", "demo.transfer", transferPayload(500)))
	assert.Equal(t, string(first.Response), string(orig.Response))
	assert.Equal(t, 2, b.count(t, "SELECT count(*) FROM demo.posting"))
}

// If the new identity already holds this very payload, the decision links to
// it without running anything again.
func TestAcceptAsNewOntoTheSamePayload(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	_, qid := b.conflict(t, "t1", "op-1", transferPayload(500), transferPayload(501))
	prior := b.exec(t, cmd("t1", "op-1-rev", "demo.transfer", transferPayload(501)))
	require.Equal(t, idem.Applied, prior.Outcome)

	acc, err := quarantine.AcceptAsNew(b.ctx, b.pool, qid, "op-1-rev", "carol", "the service already resubmitted it")
	require.NoError(t, err)
	assert.Equal(t, idem.AlreadyApplied, acc.Outcome)
	assert.Equal(t, string(prior.Response), string(acc.Response))
	assert.Equal(t, "already_applied", acc.Record.Decision.NewOutcome)
	assert.Equal(t, 2, b.count(t, "SELECT count(*) FROM demo.posting"))
}

// Two operators accept the same record at the same moment: it runs once.
func TestAcceptAsNewConcurrentlyRunsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, 6)
	for _, sameNewID := range []bool{true, false} {
		op := fmt.Sprintf("op-same-%v", sameNewID)
		_, qid := b.conflict(t, "t1", op, transferPayload(500), transferPayload(501))

		// Hold the record's lock so that both operators are queued on it and
		// race the instant it is released.
		admin := dbtest.PoolAs(t, b.dsn, dbtest.Superuser, 1)
		blocker, err := admin.Begin(b.ctx)
		require.NoError(t, err)
		_, err = blocker.Exec(b.ctx, "SELECT 1 FROM idem.quarantine WHERE id = $1 FOR UPDATE", qid)
		require.NoError(t, err)

		type result struct {
			acc quarantine.Acceptance
			err error
		}
		results := make(chan result, 2)
		for i := 0; i < 2; i++ {
			newID := op + "-rev"
			if !sameNewID {
				newID = fmt.Sprintf("%s-rev-%d", op, i)
			}
			go func() {
				acc, err := quarantine.AcceptAsNew(b.ctx, b.pool, qid, newID, fmt.Sprintf("operator-%d", i), "revision")
				results <- result{acc, err}
			}()
		}
		require.Eventually(t, func() bool {
			return b.count(t, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 2
		}, 10*time.Second, 10*time.Millisecond, "both operators wait on the record")
		require.NoError(t, blocker.Commit(b.ctx))

		var ok, refused int
		for i := 0; i < 2; i++ {
			r := <-results
			switch {
			case r.err == nil:
				ok++
				assert.Equal(t, idem.Applied, r.acc.Outcome)
			case errors.Is(r.err, quarantine.ErrAlreadyDecided):
				refused++
			default:
				t.Fatalf("unexpected error: %v", r.err)
			}
		}
		assert.Equal(t, 1, ok, "same new id: %v", sameNewID)
		assert.Equal(t, 1, refused, "same new id: %v", sameNewID)
		assert.Equal(t, 1, b.count(t, "SELECT count(*) FROM demo.posting WHERE operation_id LIKE $1 || '-rev%'", op),
			"the accepted payload ran exactly once (same new id: %v)", sameNewID)
		assert.Equal(t, 1, b.count(t, "SELECT count(*) FROM idem.audit WHERE target = $1", fmt.Sprintf("quarantine:%d", qid)))
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	b.registerAnyClass(t)
	_, qid := b.conflict(t, "t1", "op-1", transferPayload(500), transferPayload(501))
	// An identity that holds another payload than the incoming one (501).
	b.exec(t, cmd("t1", "taken", "demo.transfer", transferPayload(999)))
	// A class whose effect is application code, run by a service.
	dbtest.RegisterAppClass(t, b.dsn, "test.gocode", "forever")
	app := dbtest.PoolAs(t, b.dsn, dbtest.App, 2)
	noop := func(context.Context, pgx.Tx) (json.RawMessage, error) { return json.RawMessage(`{"ok":true}`), nil }
	_, err := idem.ExecuteFunc(b.ctx, app, cmd("t1", "go-1", "test.gocode", `{"n":1}`), noop)
	require.NoError(t, err)
	goConflict, err := idem.ExecuteFunc(b.ctx, app, cmd("t1", "go-1", "test.gocode", `{"n":2}`), noop)
	require.NoError(t, err)
	require.Equal(t, idem.Conflict, goConflict.Outcome)
	// A conflict whose effect refuses the incoming payload.
	_, err = idem.Execute(b.ctx, b.pool, cmd("t1", "bad-1", "demo.transfer", transferPayload(1)))
	require.NoError(t, err)
	badEffect, err := idem.Execute(b.ctx, b.pool, cmd("t1", "bad-1", "demo.transfer", `{"from":"alice","to":"alice","amount":1,"currency":"EUR"}`))
	require.NoError(t, err)
	require.Equal(t, idem.Conflict, badEffect.Outcome)

	tests := []struct {
		name string
		run  func() error
		want error
	}{
		{"show unknown id", func() error { _, err := quarantine.Show(b.ctx, b.pool, 999999); return err }, quarantine.ErrNotFound},
		{"reject unknown id", func() error { _, err := quarantine.Reject(b.ctx, b.pool, 999999, "alice", "x"); return err }, quarantine.ErrNotFound},
		{"accept unknown id", func() error {
			_, err := quarantine.AcceptAsNew(b.ctx, b.pool, 999999, "new", "alice", "x")
			return err
		}, quarantine.ErrNotFound},
		{"export unknown id", func() error { _, err := quarantine.Export(b.ctx, b.pool, 999999, "alice"); return err }, quarantine.ErrNotFound},
		{"reject without reason", func() error { _, err := quarantine.Reject(b.ctx, b.pool, qid, "alice", "  "); return err }, quarantine.ErrDecisionInput},
		{"reject without operator", func() error { _, err := quarantine.Reject(b.ctx, b.pool, qid, "", "x"); return err }, quarantine.ErrDecisionInput},
		{"reject with an escape sequence", func() error {
			_, err := quarantine.Reject(b.ctx, b.pool, qid, "alice", "ok\x1b]0;pwned\x07")
			return err
		}, quarantine.ErrDecisionInput},
		{"accept without reason", func() error {
			_, err := quarantine.AcceptAsNew(b.ctx, b.pool, qid, "new", "alice", "")
			return err
		}, quarantine.ErrDecisionInput},
		{"accept onto an identity with another payload", func() error {
			_, err := quarantine.AcceptAsNew(b.ctx, b.pool, qid, "taken", "alice", "revision")
			return err
		}, quarantine.ErrNewOperationConflict},
		{"accept onto the conflicting identity itself", func() error {
			_, err := quarantine.AcceptAsNew(b.ctx, b.pool, qid, "op-1", "alice", "revision")
			return err
		}, quarantine.ErrInvalidNewOperation},
		{"accept with an empty new id", func() error {
			_, err := quarantine.AcceptAsNew(b.ctx, b.pool, qid, "", "alice", "revision")
			return err
		}, quarantine.ErrInvalidNewOperation},
		{"accept with a control character", func() error {
			_, err := quarantine.AcceptAsNew(b.ctx, b.pool, qid, "new\n", "alice", "revision")
			return err
		}, quarantine.ErrInvalidNewOperation},
		{"accept with a too long new id", func() error {
			_, err := quarantine.AcceptAsNew(b.ctx, b.pool, qid, strings.Repeat("x", 257), "alice", "revision")
			return err
		}, quarantine.ErrInvalidNewOperation},
		{"accept a class run by application code", func() error {
			_, err := quarantine.AcceptAsNew(b.ctx, b.pool, goConflict.QuarantineID, "go-2", "alice", "revision")
			return err
		}, quarantine.ErrCannotExecute},
		{"accept a payload the effect refuses", func() error {
			_, err := quarantine.AcceptAsNew(b.ctx, b.pool, badEffect.QuarantineID, "bad-2", "alice", "revision")
			if pgCode(err) != "22023" {
				return fmt.Errorf("want the effect's 22023, got %w", err)
			}
			return nil
		}, nil},
	}
	for _, tc := range tests {
		before := b.snapshot(t)
		err := tc.run()
		if tc.want == nil {
			assert.NoError(t, err, tc.name)
		} else {
			assert.ErrorIs(t, err, tc.want, tc.name)
		}
		assert.Equal(t, before, b.snapshot(t), "%s: nothing written", tc.name)
	}
	assert.Zero(t, b.count(t, "SELECT count(*) FROM idem.quarantine WHERE operation_id = 'taken'"),
		"the refused accept-as-new left no conflict record for the new identity")

	// The database refuses the same inputs when called directly.
	for _, sql := range []string{
		"SELECT idem.quarantine_reject($1, 'alice', NULL)",
		"SELECT idem.quarantine_reject($1, NULL, 'x')",
		"SELECT * FROM idem.quarantine_accept_as_new($1, 'new', 'alice', ' ')",
		"SELECT idem.quarantine_reject($1, 'alice', E'x\\x1b[2J')",
		"SELECT idem.quarantine_reject($1, E'alice\\n', 'x')",
	} {
		_, err := b.pool.Exec(b.ctx, sql, qid)
		assert.Equal(t, "IX104", pgCode(err), sql)
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	b := setup(t, 4)
	b.registerAnyClass(t)
	// 12 records: tenants a and b, classes test.any and demo.transfer.
	var ids []int64
	for i := 0; i < 12; i++ {
		tenant := []string{"a", "b"}[i%2]
		class := "test.any"
		stored, incoming := fmt.Sprintf(`{"n":%d}`, i), fmt.Sprintf(`{"n":%d}`, i+100)
		if i%3 == 0 {
			class, stored, incoming = "demo.transfer", transferPayload(i+1), transferPayload(i+1000)
		}
		op := fmt.Sprintf("op-%02d", i)
		b.exec(t, cmd(tenant, op, class, stored))
		res := b.exec(t, cmd(tenant, op, class, incoming))
		require.Equal(t, idem.Conflict, res.Outcome)
		ids = append(ids, res.QuarantineID)
	}
	// Decide some: 0-3 rejected, 4 accepted.
	for _, i := range []int{0, 1, 2, 3} {
		_, err := quarantine.Reject(b.ctx, b.pool, ids[i], "alice", "no")
		require.NoError(t, err)
	}
	_, err := quarantine.AcceptAsNew(b.ctx, b.pool, ids[4], "op-04-rev", "alice", "revision")
	require.NoError(t, err)
	// Newest activity: a repeat of record 5 makes it the most recent.
	time.Sleep(2 * time.Millisecond)
	b.exec(t, cmd("b", "op-05", "test.any", `{"n":105}`))

	idsOf := func(p quarantine.Page) []int64 {
		out := make([]int64, len(p.Items))
		for i, s := range p.Items {
			out[i] = s.ID
		}
		return out
	}
	page, err := quarantine.List(b.ctx, b.pool, quarantine.Filter{})
	require.NoError(t, err)
	assert.Equal(t, []int64{ids[5], ids[11], ids[10], ids[9], ids[8], ids[7], ids[6]}, idsOf(page), "open by default, newest activity first")
	assert.Nil(t, page.Next)
	assert.Equal(t, int64(2), page.Items[0].Occurrences)
	assert.Equal(t, 1, page.Items[0].Changes)

	page, err = quarantine.List(b.ctx, b.pool, quarantine.Filter{Status: quarantine.StatusRejected})
	require.NoError(t, err)
	assert.ElementsMatch(t, ids[:4], idsOf(page))
	assert.Equal(t, "alice", page.Items[0].DecidedBy)
	page, err = quarantine.List(b.ctx, b.pool, quarantine.Filter{Status: quarantine.StatusAccepted})
	require.NoError(t, err)
	require.Equal(t, []int64{ids[4]}, idsOf(page))
	assert.Equal(t, "op-04-rev", page.Items[0].NewOperationID)

	page, err = quarantine.List(b.ctx, b.pool, quarantine.Filter{Status: quarantine.StatusAll, Tenant: "a"})
	require.NoError(t, err)
	assert.ElementsMatch(t, []int64{ids[0], ids[2], ids[4], ids[6], ids[8], ids[10]}, idsOf(page))
	page, err = quarantine.List(b.ctx, b.pool, quarantine.Filter{Status: quarantine.StatusAll, Class: "demo.transfer"})
	require.NoError(t, err)
	assert.ElementsMatch(t, []int64{ids[0], ids[3], ids[6], ids[9]}, idsOf(page))
	page, err = quarantine.List(b.ctx, b.pool, quarantine.Filter{Status: quarantine.StatusAll, Since: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	assert.Empty(t, page.Items)

	// Keyset pages of 5 cover everything once, in order, for every filter.
	for _, f := range []quarantine.Filter{
		{Status: quarantine.StatusAll},
		{Status: quarantine.StatusOpen},
		{Status: quarantine.StatusAll, Tenant: "b"},
		{Status: quarantine.StatusOpen, Tenant: "b"},
	} {
		full := f
		full.Limit = 100
		want, err := quarantine.List(b.ctx, b.pool, full)
		require.NoError(t, err)
		var got []int64
		f.Limit = 5
		for pages := 0; ; pages++ {
			require.Less(t, pages, 10)
			p, err := quarantine.List(b.ctx, b.pool, f)
			require.NoError(t, err)
			got = append(got, idsOf(p)...)
			if p.Next == nil {
				break
			}
			// The cursor survives a round trip through its text form.
			c, err := quarantine.ParseCursor(p.Next.String())
			require.NoError(t, err)
			assert.Equal(t, p.Items[len(p.Items)-1].Cursor, c.String())
			f.After = &c
		}
		assert.Equal(t, idsOf(want), got, "%+v", f)
	}

	for _, f := range []quarantine.Filter{{Status: "closed"}, {Limit: -1}, {Limit: quarantine.MaxLimit + 1}} {
		_, err := quarantine.List(b.ctx, b.pool, f)
		assert.ErrorIs(t, err, quarantine.ErrInvalidFilter, "%+v", f)
	}
	for _, s := range []string{"", "x", "12", "12:", ":3", "1:-2", "a:b"} {
		_, err := quarantine.ParseCursor(s)
		assert.ErrorIs(t, err, quarantine.ErrInvalidFilter, s)
	}
}

func TestExport(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	stored := `{"from":"alice","to":"bob","amount":500,"currency":"EUR","memo":"caf\u00e9 \"quoted\" \\ /","rate":1.5e-7,"big":1e21}`
	incoming := `{"from":"alice","to":"bob","amount":501,"currency":"EUR","memo":"café","rate":0.25,"big":1e21}`
	_, qid := b.conflict(t, "t1", "op-1", stored, incoming)

	bundle, err := quarantine.Export(b.ctx, b.pool, qid, "dave")
	require.NoError(t, err)
	assert.Equal(t, quarantine.BundleFormat, bundle.Format)
	assert.True(t, bundle.Verified)
	wantStored, storedHash, err := idem.Canonicalize([]byte(stored), idem.PayloadLimits{})
	require.NoError(t, err)
	_, incomingHash, err := idem.Canonicalize([]byte(incoming), idem.PayloadLimits{})
	require.NoError(t, err)
	assert.Equal(t, string(wantStored), bundle.Stored.CanonicalPayload, "the exact canonical bytes")
	assert.Equal(t, storedHash, bundle.Stored.Hash)
	assert.Equal(t, storedHash, idem.HashCanonical([]byte(bundle.Stored.CanonicalPayload)))
	assert.Equal(t, incomingHash, bundle.Incoming.Hash)
	assert.Equal(t, incomingHash, idem.HashCanonical([]byte(bundle.Incoming.CanonicalPayload)))
	assert.True(t, bundle.Stored.HashVerified)
	assert.True(t, bundle.Incoming.HashVerified)
	assert.Equal(t, qid, bundle.Record.ID)
	assert.NotEmpty(t, bundle.Diff)
	assert.Equal(t, "dave", bundle.ExportedBy)
	assert.Equal(t, string(dbtest.Operator), bundle.ExportedDBUser)
	assert.NotEmpty(t, bundle.Instructions)

	// The export is in the audit log, and the bundle points at that row.
	rows, err := audit.List(b.ctx, b.pool, audit.Filter{Action: quarantine.ActionExport})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, bundle.Audit.ID, rows[0].ID)
	assert.Equal(t, bundle.Audit.Hash, rows[0].Hash)
	assert.Equal(t, "dave", rows[0].Actor)
	report, err := audit.Verify(b.ctx, b.pool, audit.Anchor{ID: bundle.Audit.ID, Hash: bundle.Audit.Hash})
	require.NoError(t, err)
	assert.True(t, report.Intact, report.Problem)

	// The bundle is self-contained JSON.
	raw, err := json.Marshal(bundle)
	require.NoError(t, err)
	var generic map[string]any
	require.NoError(t, json.Unmarshal(raw, &generic))
	for _, k := range []string{"record", "diff", "stored", "incoming", "verified", "instructions", "audit"} {
		assert.Contains(t, generic, k)
	}

	// A purged stored side is exported with its hash alone, and said so.
	dbtest.Seed(t, b.dsn, "demo.transfer", "t9", "gone-", 1, 0, 0)
	dbtest.Admin(t, b.dsn, "SET session_replication_role = replica; DELETE FROM idem.inbox_body WHERE tenant_id = 't9'; "+
		"INSERT INTO idem.horizon_plan (op_class, retention, contract, before, cutoff, margin, planned_by, planned_person, "+
		"planned_db_user, approved_at, approved_by, approved_person, purge_started_at, state, proof) VALUES ('demo.transfer', "+
		"'forever', 'C-1', now() + interval '1 hour', now() + interval '1 hour', '5 min', 'alice', 'alice', 'x', now(), 'bob', "+
		"'bob', now(), 'purging', '[]')")
	gone := b.exec(t, cmd("t9", "gone-1", "demo.transfer", transferPayload(7)))
	require.Equal(t, idem.Conflict, gone.Outcome)
	tomb, err := quarantine.Export(b.ctx, b.pool, gone.QuarantineID, "dave")
	require.NoError(t, err)
	assert.True(t, tomb.Verified, "the incoming side verifies; the stored side is gone")
	assert.False(t, tomb.Stored.HashVerified)
	assert.Contains(t, tomb.Stored.Problem, "purged")
	assert.Empty(t, tomb.Stored.CanonicalPayload)
}

// TestForgedDecisionIsRefused: an operator cannot write a decision by hand,
// even with the settings an earlier version trusted; only the decision
// functions decide, and they write the audit row themselves.
func TestForgedDecisionIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	_, qid := b.conflict(t, "t1", "op-forge", transferPayload(500), transferPayload(501))
	before := b.snapshot(t)
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer tx.Rollback(b.ctx)
	_, err = tx.Exec(b.ctx, "SELECT set_config('idem.decision_path', 'on', true)")
	require.NoError(t, err)
	_, err = tx.Exec(b.ctx, `UPDATE idem.quarantine SET status = 'accepted', new_operation_id = 'zzz',
		new_outcome = 'applied', decided_at = now(), decided_by = 'mallory', decided_db_user = 'x',
		decision_reason = 'trust me', decision_audit_id = 1 WHERE id = $1`, qid)
	assert.Equal(t, "42501", pgCode(err), "%v", err)
	require.NoError(t, tx.Rollback(b.ctx))
	assert.Equal(t, before, b.snapshot(t))
}
