package lab

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// deliveryResult is one delivery and the reply its caller got (nil: killed
// before the reply reached the caller).
type deliveryResult struct {
	d     delivery
	reply *Reply
}

// posting is one row of a scratch ledger.
type posting struct {
	id     string
	amount int64
}

type identityKey struct{ tenant, op string }

// readPostings reads a scratch ledger, each identity's postings in the order
// they were posted.
func readPostings(ctx context.Context, pool *pgxpool.Pool, sql string) (map[identityKey][]posting, error) {
	rows, err := pool.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("read postings: %w", err)
	}
	defer rows.Close()
	out := map[identityKey][]posting{}
	for rows.Next() {
		var k identityKey
		var p posting
		if err := rows.Scan(&k.tenant, &k.op, &p.id, &p.amount); err != nil {
			return nil, fmt.Errorf("read postings: %w", err)
		}
		out[k] = append(out[k], p)
	}
	return out, rows.Err()
}

const examplesPerAnomaly = 3

// expectedIdentity is one business operation a trial stands for, and the
// amount it must be applied with.
type expectedIdentity struct {
	key      identityKey
	amount   int64
	revision bool
}

// identitiesOf lists the business operations of t: its own, the other
// tenant's with the same operation id, its settlement revision.
func identitiesOf(t Trial) []expectedIdentity {
	kinds := t.operationKinds()
	out := make([]expectedIdentity, len(kinds))
	for i, k := range kinds {
		out[i] = expectedIdentity{key: identityOf(t, k), amount: amountOf(t, k), revision: k == KindRevision}
	}
	return out
}

// judgement accumulates one design's counts and examples.
type judgement struct {
	rep   DesignReport
	shown map[string]int
	kills []*killRecord
}

func (j *judgement) example(anomaly string, t Trial, id identityKey, format string, args ...any) {
	if j.shown[anomaly] >= examplesPerAnomaly {
		return
	}
	j.shown[anomaly]++
	kill := "none"
	if j.kills[t.Index] != nil {
		kill = j.kills[t.Index].Step
	}
	j.rep.Examples = append(j.rep.Examples, Example{
		Anomaly: anomaly, Operation: id.tenant + "/" + id.op, Kill: kill, Detail: fmt.Sprintf(format, args...),
	})
}

// judge compares a design's ledger and replies with the intended ledger: each
// operation applied exactly once, with the payload it was first applied with;
// every request with that payload answered with that posting (a refusal as
// "conflict" is a false conflict); every request with another payload
// answered "conflict".
func judge(workload []Trial, log [][]deliveryResult, kills []*killRecord, postings map[identityKey][]posting) DesignReport {
	j := &judgement{shown: map[string]int{}, kills: kills}
	postings = byBusinessIdentity(log, postings)
	for i, t := range workload {
		j.rep.Operations += len(log[i])
		byID := map[identityKey][]deliveryResult{}
		for _, dr := range log[i] {
			k := identityKey{dr.d.Tenant, dr.d.OperationID}
			byID[k] = append(byID[k], dr)
		}
		for _, e := range identitiesOf(t) {
			j.rep.Identities++
			j.identity(t, e, byID[e.key], postings[e.key])
		}
	}
	return j.rep
}

// identity judges one business operation: its postings, then every reply.
func (j *judgement) identity(t Trial, e expectedIdentity, drs []deliveryResult, ps []posting) {
	switch {
	case len(ps) == 0 && e.revision:
		j.rep.LostRevisions++
		j.example(AnomalyLostRevisions, t, e.key, "the correction to %d was never posted (%d deliveries)", e.amount, len(drs))
	case len(ps) == 0:
		j.rep.Lost++
		j.example(AnomalyLost, t, e.key, "no posting after %d deliveries", len(drs))
	case len(ps) > 1:
		j.rep.Doubled++
		amounts := make([]int64, len(ps))
		for k, p := range ps {
			amounts[k] = p.amount
		}
		j.example(AnomalyDoubled, t, e.key, "%d postings, amounts %v", len(ps), amounts)
	}
	// The payload the identity stands for: the intended one if it was
	// applied, else the one that was (a concurrent duplicate with another
	// payload may legitimately win the race against the recovery retry).
	accepted := e.amount
	byPosting := map[string]posting{}
	ownApplied := false
	for _, p := range ps {
		byPosting[p.id] = p
		ownApplied = ownApplied || p.amount == e.amount
	}
	if len(ps) > 0 && !ownApplied {
		accepted = ps[0].amount
	}
	for _, dr := range drs {
		j.reply(t, e.key, dr, accepted, byPosting, len(ps) == 1)
	}
}

// reply judges one reply to a request for an operation that stands for the
// amount accepted. A refusal counts as a false conflict only when the
// operation was applied once (appliedOnce): a doubled one stands for two
// payloads, and which one its marker kept is a matter of timing.
func (j *judgement) reply(t Trial, id identityKey, dr deliveryResult, accepted int64, byPosting map[string]posting, appliedOnce bool) {
	switch {
	case dr.reply == nil:
		return
	case dr.reply.Outcome == OutcomeConflict:
		if appliedOnce && dr.d.Amount == accepted {
			j.rep.FalseConflicts++
			j.example(AnomalyFalseConflicts, t, id, "%s request for %d refused as a conflict; the operation stands for that very payload", dr.d.Kind, dr.d.Amount)
		}
		return
	case dr.d.Amount != accepted:
		j.rep.MissedConflicts++
		j.example(AnomalyMissedConflicts, t, id, "%s request for %d answered %s; the operation stands for %d",
			dr.d.Kind, dr.d.Amount, dr.reply.Outcome, accepted)
	}
	pid := postingID(dr.reply.Response)
	if pid == "" {
		// No result at all (a marker without a response): the caller is
		// told nothing wrong, only nothing; lost covers the ledger side.
		return
	}
	p, ok := byPosting[pid]
	switch {
	case !ok:
		j.rep.WrongResponse++
		j.example(AnomalyWrongResponse, t, id, "%s request for %d got posting %s, which is not one of this operation's", dr.d.Kind, dr.d.Amount, pid)
	case p.amount != dr.d.Amount:
		j.rep.WrongResponse++
		j.example(AnomalyWrongResponse, t, id, "%s request for %d got the posting of %d", dr.d.Kind, dr.d.Amount, p.amount)
	}
}

// byBusinessIdentity files postings recorded under a client's idempotency key
// (a design that hands the key to the ledger as the operation id) under the
// business identity the key was minted for.
func byBusinessIdentity(log [][]deliveryResult, postings map[identityKey][]posting) map[identityKey][]posting {
	alias := map[identityKey]identityKey{}
	for _, drs := range log {
		for _, dr := range drs {
			if dr.d.Key != "" {
				alias[identityKey{dr.d.Tenant, dr.d.Key}] = identityKey{dr.d.Tenant, dr.d.OperationID}
			}
		}
	}
	out := make(map[identityKey][]posting, len(postings))
	for k, ps := range postings {
		if to, ok := alias[k]; ok {
			k = to
		}
		out[k] = append(out[k], ps...)
	}
	return out
}

// postingID extracts the ledger's posting id from a saved response.
func postingID(resp json.RawMessage) string {
	if len(resp) == 0 {
		return ""
	}
	var v struct {
		PostingID string `json:"posting_id"`
	}
	if json.Unmarshal(resp, &v) != nil {
		return ""
	}
	return v.PostingID
}
