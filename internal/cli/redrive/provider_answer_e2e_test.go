package redrive_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/quarantine"
	"github.com/idemctl/idemctl/redrive"
)

// providerRefusing is an HTTP target that answers every request 422 with a
// body, as a provider does when the key was used there with another payload;
// it counts the requests.
func providerRefusing(t *testing.T, body string) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var hits atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, body)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/transfers", &hits
}

// A re-drive answered 422 while the inbox holds nothing: the key was used at
// the provider with another payload. It becomes a quarantine record whose
// stored side is the provider's answer (status, body) with the payload sent,
// shown as such, not sent again, and decided like any other record.
func TestRedrive422WithNothingInTheInboxIsQuarantined(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, dsn := dbtest.NewPool(t, 4)
	const answer = `{"error":"idempotency_key_in_use","message":"Keys for idempotent requests can only be used with the same parameters they were first used with."}`
	url, hits := providerRefusing(t, answer)
	_, err := redrive.Set(ctx, pool, "demo.transfer_app", &redrive.Config{Kind: redrive.KindHTTP, URL: url, TimeoutSeconds: 5}, true, "alice")
	require.NoError(t, err)
	w := &redriveWorld{t: t, pool: pool, dsn: dsn}

	code, got, errOut := w.resolve([]string{appLine("t1", "op-1", 100)})
	require.Equal(t, cmdutil.ExitConflict, code, errOut)
	r := got["t1/op-1"]
	assert.Equal(t, "conflict", r.Outcome)
	require.NotNil(t, r.QuarantineID, errOut)
	assert.Nil(t, r.Error)
	assert.Contains(t, r.Note, "the provider answered 422")
	assert.EqualValues(t, 1, hits.Load())
	qid := *r.QuarantineID

	// The record: the provider's answer as the stored side, the payload sent.
	code, out, errOut := runQ(t, dsn, "quarantine", "show", fmt.Sprint(qid), "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	var rec quarantine.Record
	require.NoError(t, json.Unmarshal([]byte(out), &rec))
	assert.Equal(t, quarantine.StoredProvider, rec.StoredSide)
	assert.Empty(t, rec.StoredHash)
	assert.Contains(t, []string{"", "null"}, string(rec.StoredPayload))
	var ans quarantine.ProviderAnswer
	require.NoError(t, json.Unmarshal(rec.StoredResponse, &ans))
	assert.Equal(t, quarantine.ProviderAnswer{Status: 422, Body: answer, Via: "http", Target: url}, ans)
	assert.JSONEq(t, `{"from":"a","to":"b","amount":100,"currency":"EUR"}`, string(rec.IncomingPayload))
	assert.Equal(t, "t1", rec.Tenant)
	assert.Equal(t, "demo.transfer_app", rec.Class)
	assert.Equal(t, quarantine.StatusOpen, rec.Status)

	code, out, _ = runQ(t, dsn, "quarantine", "show", fmt.Sprint(qid), "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "the provider's answer: it refused this key")
	assert.Contains(t, out, "idempotency_key_in_use")
	code, out, errOut = runQ(t, dsn, "quarantine", "export", fmt.Sprint(qid), "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "the other side is the provider's answer")
	assert.NotContains(t, out, "purged under a proven replay horizon")
	code, out, _ = runQ(t, dsn, "quarantine", "list", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "open (provider's answer)")
	code, _, errOut = runQ(t, dsn, "inspect", "--tenant", "t1", "--op", "op-1")
	assert.Equal(t, cmdutil.ExitNotFound, code)
	assert.Contains(t, errOut, fmt.Sprintf("quarantine record #%d", qid))
	code, out, errOut = runQ(t, dsn, "inspect", "--tenant", "t1", "--op", "op-1", "--history", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	assert.Contains(t, out, "provider refused")

	// Audited, with the answer.
	var audited int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM idem.audit WHERE action = 'quarantine.provider_answer'
		AND target = $1 AND details::jsonb -> 'answer' ->> 'status' = '422'`, fmt.Sprintf("quarantine:%d", qid)).Scan(&audited))
	assert.Equal(t, 1, audited)

	// A dry run says what a real run does now: conflict, from the record.
	code, got, errOut = w.resolve([]string{appLine("t1", "op-1", 100)}, "--dry-run")
	require.Equal(t, cmdutil.ExitConflict, code, errOut)
	assert.Equal(t, "conflict", got["t1/op-1"].Outcome)
	assert.Equal(t, qid, *got["t1/op-1"].QuarantineID)

	// Resolved again: answered from the record, not sent again.
	code, got, errOut = w.resolve([]string{appLine("t1", "op-1", 100)})
	require.Equal(t, cmdutil.ExitConflict, code, errOut)
	assert.Equal(t, qid, *got["t1/op-1"].QuarantineID)
	assert.EqualValues(t, 1, hits.Load(), "not sent again")

	// Decided like any record: rejected, with its audit row.
	code, _, errOut = runQ(t, dsn, "quarantine", "reject", fmt.Sprint(qid), "--reason", "the provider holds another charge", "--yes", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	var status string
	require.NoError(t, pool.QueryRow(ctx, "SELECT status FROM idem.quarantine WHERE id = $1", qid).Scan(&status))
	assert.Equal(t, "rejected", status)
}

// Only an operator records a provider's answer, only for an identity the
// inbox does not hold, only with a 4xx and its body; accept-as-new of such a
// record runs the effect under the new id like any other.
func TestProviderAnswerRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, dsn := dbtest.NewPool(t, 2)
	payload := []byte(`{"from":"alice","to":"bob","amount":700,"currency":"EUR"}`)
	canon, hash, err := idem.Canonicalize(payload, idem.PayloadLimits{})
	require.NoError(t, err)
	answer := quarantine.ProviderAnswer{Status: 422, Body: `{"error":"key reused"}`}
	id := idem.Identity{TenantID: "acme", OperationID: "p-1"}

	// An app login (a service) cannot forge one, neither through the
	// function nor by writing the table.
	app := dbtest.PoolAs(t, dsn, dbtest.App, 1)
	_, err = quarantine.RecordProviderAnswer(ctx, app, id, "demo.transfer", canon, hash, answer, "svc")
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "%v", err)
	assert.Equal(t, "42501", pgErr.Code)
	for _, db := range []idem.DBTX{app, pool} {
		_, err = db.Exec(ctx, `INSERT INTO idem.quarantine (tenant_id, operation_id, incoming_hash, incoming_class, op_class,
			incoming_payload, diff, holds_on, stored_response) VALUES ('acme', 'p-9', $1, 'demo.transfer', 'demo.transfer', $2, '[]', 'provider',
			'{"status":422,"body":"x"}')`, hash, string(canon))
		require.True(t, errors.As(err, &pgErr), "%v", err)
		assert.Equal(t, "42501", pgErr.Code)
	}

	// Not a 4xx with a body: refused.
	_, err = quarantine.RecordProviderAnswer(ctx, pool, id, "demo.transfer", canon, hash, quarantine.ProviderAnswer{Status: 200, Body: "ok"}, "alice")
	assert.ErrorIs(t, err, quarantine.ErrProviderAnswer)

	// The inbox holds the identity: the protocol's conflict, not this.
	recApply(t, dsn, map[string]int{"held": 100})
	_, err = quarantine.RecordProviderAnswer(ctx, pool, idem.Identity{TenantID: "acme", OperationID: "held"}, "demo.transfer", canon, hash, answer, "alice")
	assert.ErrorIs(t, err, quarantine.ErrProviderAnswer)

	// An operator records it; a repeat counts on the same record.
	qid, err := quarantine.RecordProviderAnswer(ctx, pool, id, "demo.transfer", canon, hash, answer, "alice")
	require.NoError(t, err)
	again, err := quarantine.RecordProviderAnswer(ctx, pool, id, "demo.transfer", canon, hash, answer, "alice")
	require.NoError(t, err)
	assert.Equal(t, qid, again)

	// Accept as new: the effect runs under the new id (a SQL class, no money
	// declaration: one person).
	code, _, errOut := runQ(t, dsn, "quarantine", "accept-as-new", fmt.Sprint(qid), "--new-operation-id", "p-1-rev2",
		"--reason", "the customer confirmed a new charge", "--yes", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	var postings int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM demo.posting WHERE operation_id = 'p-1-rev2'").Scan(&postings))
	assert.Positive(t, postings)
	var status string
	var occurrences int
	require.NoError(t, pool.QueryRow(ctx, "SELECT status, occurrences FROM idem.quarantine WHERE id = $1", qid).Scan(&status, &occurrences))
	assert.Equal(t, [2]any{"accepted", 2}, [2]any{status, occurrences})
}
