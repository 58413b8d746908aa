package governance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// EntryLine is one identity of an entry plan as its approver sees it: the
// class, the evidence, the amount for a money class, and the run's outcome.
type EntryLine struct {
	Seq         int    `json:"seq"`
	TenantID    string `json:"tenant_id"`
	OperationID string `json:"operation_id"`
	Class       string `json:"class"`
	Evidence    string `json:"evidence"`
	// Outcome is empty before the run; then entered, exists (the inbox
	// held it with the same payload), quarantined (with another payload:
	// a conflict, its evidence in the quarantine) or refused.
	Outcome string `json:"outcome,omitempty"`
	// Held, before the run, says the inbox already holds the identity:
	// "same payload" (the run leaves it alone) or "another payload" (the
	// run quarantines the conflict): either way the item does not enter,
	// and its amount is not in what the plan records.
	Held string `json:"held,omitempty"`
	// Money: the class moves money; Amount is then "EUR 9.00", or empty
	// when the payload's amount cannot be read (named in the review's
	// MoneyProblems).
	Money  bool   `json:"money"`
	Amount string `json:"amount,omitempty"`
	// Response is what the identity's retries get back once the plan has
	// entered it (a record plan's item; an import's rows keep theirs in its
	// stage): the approver sees what the service will answer.
	Response json.RawMessage `json:"response,omitempty"`
}

// EntryReview is an entry plan with its identities and, for money classes,
// the totals per currency of what it records (the identities not left
// alone or refused by a run).
type EntryReview struct {
	EntryPlan
	// Entries are a record plan's identities; an import plan's (ShowEntry)
	// are its rows that did not enter, with their outcomes, the first
	// NotEnteredShown of NotEntered.
	Entries       []EntryLine    `json:"entries"`
	NotEntered    int            `json:"not_entered,omitempty"`
	Totals        []Total        `json:"totals"`
	MoneyProblems []MoneyProblem `json:"money_problems"`
}

// ListEntries returns the newest entry plans, at most limit.
func ListEntries(ctx context.Context, db DBTX, limit int) ([]EntryReview, error) {
	rows, err := db.Query(ctx, "SELECT to_jsonb(p) FROM idem.entry_plan p ORDER BY id DESC LIMIT $1", limit)
	if err != nil {
		return nil, fmt.Errorf("list entry plans: %w", err)
	}
	raws, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("list entry plans: %w", err)
	}
	out := make([]EntryReview, 0, len(raws))
	for _, raw := range raws {
		p, err := decodeEntry(raw)
		if err != nil {
			return nil, err
		}
		r, err := ReviewEntry(ctx, db, p)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ShowEntry loads an entry plan with its identities and money totals.
func ShowEntry(ctx context.Context, db DBTX, id int64) (EntryReview, error) {
	p, err := LoadEntry(ctx, db, id)
	if err != nil {
		return EntryReview{}, err
	}
	r, err := ReviewEntry(ctx, db, p)
	if err != nil || p.Kind != EntryImport {
		return r, err
	}
	return notEntered(ctx, db, r)
}

// LoadEntry reads entry plan id as it stands; ErrNotFound when there is
// none.
func LoadEntry(ctx context.Context, db DBTX, id int64) (EntryPlan, error) {
	var raw []byte
	err := db.QueryRow(ctx, "SELECT to_jsonb(p) FROM idem.entry_plan p WHERE id = $1", id).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return EntryPlan{}, fmt.Errorf("%w: no entry plan %d (idemctl record list shows them)", ErrNotFound, id)
	}
	if err != nil {
		return EntryPlan{}, fmt.Errorf("load entry plan %d: %w", id, err)
	}
	return decodeEntry(raw)
}

// NotEnteredShown is how many of an import's rows that did not enter
// ShowEntry loads (a rerun of a whole store skips all of them).
const NotEnteredShown = 1000

// notEntered adds an import plan's rows that did not enter, with their
// outcomes (skipped, quarantined, refused, conflict_hash_only), in the
// plan's order: the first NotEnteredShown, and how many there are.
func notEntered(ctx context.Context, db DBTX, r EntryReview) (EntryReview, error) {
	rows, err := db.Query(ctx, `SELECT i.seq, i.tenant_id, i.operation_id, i.op_class, coalesce(i.evidence, ''), i.outcome,
			count(*) OVER ()
		FROM idem.entry_item i WHERE i.plan_id = $1 AND i.outcome IS NOT NULL ORDER BY i.seq LIMIT $2`, r.ID, NotEnteredShown)
	if err != nil {
		return EntryReview{}, fmt.Errorf("load import plan %d's rows that did not enter: %w", r.ID, err)
	}
	var l EntryLine
	_, err = pgx.ForEachRow(rows, []any{&l.Seq, &l.TenantID, &l.OperationID, &l.Class, &l.Evidence, &l.Outcome, &r.NotEntered},
		func() error {
			r.Entries = append(r.Entries, l)
			return nil
		})
	if err != nil {
		return EntryReview{}, fmt.Errorf("load import plan %d's rows that did not enter: %w", r.ID, err)
	}
	return r, nil
}

// ReviewEntry adds an entry plan's identities and money totals to it. An
// import's plan is reviewed by its source's digest, counts and sample, and
// the totals its seal added up: its items (a store's whole history,
// millions of rows) are not loaded.
func ReviewEntry(ctx context.Context, db DBTX, p EntryPlan) (EntryReview, error) {
	r := EntryReview{EntryPlan: p, Entries: []EntryLine{}, Totals: []Total{}, MoneyProblems: []MoneyProblem{}}
	if p.Kind == EntryImport {
		return reviewImport(ctx, db, r)
	}
	rows, err := db.Query(ctx, `SELECT i.seq, i.tenant_id, i.operation_id, i.op_class, i.evidence, coalesce(i.outcome, ''),
			CASE WHEN i.outcome IS NOT NULL OR h.tenant_id IS NULL THEN ''
			     WHEN h.op_class = i.op_class AND h.payload_digest = decode(substr(i.payload_hash, 12), 'hex') THEN 'same payload'
			     ELSE 'another payload' END,
			i.payload, c.money, i.response
		FROM idem.entry_item i LEFT JOIN idem.op_class c ON c.name = i.op_class
		LEFT JOIN idem.identity h ON h.tenant_id = i.tenant_id AND h.operation_id = i.operation_id
		WHERE i.plan_id = $1 ORDER BY i.seq`, p.ID)
	if err != nil {
		return EntryReview{}, fmt.Errorf("load entry plan %d's items: %w", p.ID, err)
	}
	var totals Totals
	var l EntryLine
	var payload string
	var money *Money
	var response []byte
	_, err = pgx.ForEachRow(rows, []any{&l.Seq, &l.TenantID, &l.OperationID, &l.Class, &l.Evidence, &l.Outcome, &l.Held, &payload, &money, &response},
		func() error {
			line := l
			line.Response = json.RawMessage(bytes.Clone(response))
			line.Money = money != nil
			if money != nil {
				if amount, cur, err := money.Read([]byte(payload)); err == nil {
					line.Amount = cur + " " + groupThousands(formatMajor(amount, cur))
				}
			}
			if (line.Outcome == "" && line.Held == "") || line.Outcome == "entered" {
				totals.Add("item "+strconv.Itoa(l.Seq)+" ("+l.TenantID+"/"+l.OperationID+")", money, []byte(payload))
			}
			r.Entries = append(r.Entries, line)
			money = nil
			return nil
		})
	if err != nil {
		return EntryReview{}, fmt.Errorf("load entry plan %d's items: %w", p.ID, err)
	}
	r.Totals = totals.List()
	if totals.Problems != nil {
		r.MoneyProblems = totals.Problems
	}
	return r, nil
}
