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

// judge compares a design's ledger and replies with the intended ledger: each
// operation applied exactly once, with the payload it was first applied with;
// every request with that payload answered with that posting; every request
// with another payload answered "conflict".
func judge(workload []Trial, log [][]deliveryResult, kills []*killRecord, postings map[identityKey][]posting) DesignReport {
	var rep DesignReport
	shown := map[string]int{}
	example := func(anomaly string, t Trial, format string, args ...any) {
		if shown[anomaly] >= examplesPerAnomaly {
			return
		}
		shown[anomaly]++
		kill := "none"
		if kills[t.Index] != nil {
			kill = kills[t.Index].Step
		}
		rep.Examples = append(rep.Examples, Example{
			Anomaly: anomaly, Operation: t.Tenant + "/" + t.OperationID, Kill: kill, Detail: fmt.Sprintf(format, args...),
		})
	}
	for i, t := range workload {
		rep.Operations += len(log[i])
		ps := postings[identityKey{t.Tenant, t.OperationID}]
		switch {
		case len(ps) == 0:
			rep.Lost++
			example(AnomalyLost, t, "no posting after %d deliveries", len(log[i]))
		case len(ps) > 1:
			rep.Doubled++
			amounts := make([]int64, len(ps))
			for j, p := range ps {
				amounts[j] = p.amount
			}
			example(AnomalyDoubled, t, "%d postings, amounts %v", len(ps), amounts)
		}
		// The payload the identity stands for: the trial's own if it was
		// applied, else the one that was (a concurrent duplicate with another
		// payload may legitimately win the race against the recovery retry).
		accepted := t.Amount
		byID := map[string]posting{}
		ownApplied := false
		for _, p := range ps {
			byID[p.id] = p
			ownApplied = ownApplied || p.amount == t.Amount
		}
		if len(ps) > 0 && !ownApplied {
			accepted = ps[0].amount
		}
		for _, dr := range log[i] {
			if dr.reply == nil || dr.reply.Outcome == OutcomeConflict {
				continue
			}
			if dr.d.Amount != accepted {
				rep.MissedConflicts++
				example(AnomalyMissedConflicts, t, "%s request for %d answered %s; the operation stands for %d",
					dr.d.Kind, dr.d.Amount, dr.reply.Outcome, accepted)
			}
			id := postingID(dr.reply.Response)
			if id == "" {
				// No result at all (a marker without a response): the caller is
				// told nothing wrong, only nothing; lost covers the ledger side.
				continue
			}
			p, ok := byID[id]
			switch {
			case !ok:
				rep.WrongResponse++
				example(AnomalyWrongResponse, t, "%s request for %d got posting %s, which does not exist", dr.d.Kind, dr.d.Amount, id)
			case p.amount != dr.d.Amount:
				rep.WrongResponse++
				example(AnomalyWrongResponse, t, "%s request for %d got the posting of %d", dr.d.Kind, dr.d.Amount, p.amount)
			}
		}
	}
	return rep
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
