package quarantine

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/idem"
)

var (
	//go:embed sql/bulk_accept_review.sql
	bulkAcceptReviewSQL string
	//go:embed sql/accept_clashes.sql
	acceptClashesSQL string
)

// Clash is an open record that cannot run as a new operation under a rule:
// its new identity is already held by another payload (accepting it would
// be refused), or an earlier record of the same set takes the same new id
// with another payload. The database refuses to plan or approve a set with
// one (idem.quarantine_accept_clashes).
type Clash struct {
	ID             int64  `json:"id"`
	Tenant         string `json:"tenant"`
	OperationID    string `json:"operation_id"`
	NewOperationID string `json:"new_operation_id"`
	Problem        string `json:"problem"`
}

// String is the clash as a line: "record 14 (t0/big-00014): new operation id ...".
func (c Clash) String() string {
	return fmt.Sprintf("record %d (%s/%s): %s", c.ID, c.Tenant, c.OperationID, c.Problem)
}

// Clashes lists the open records of ids that cannot run under rule, in id
// order.
func Clashes(ctx context.Context, db idem.DBTX, ids []int64, rule string) ([]Clash, error) {
	rows, err := db.Query(ctx, acceptClashesSQL, ids, rule)
	if err != nil {
		return nil, fmt.Errorf("check the new operation ids: %w", err)
	}
	out := []Clash{}
	var c Clash
	_, err = pgx.ForEachRow(rows, []any{&c.ID, &c.Tenant, &c.OperationID, &c.NewOperationID, &c.Problem}, func() error {
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("check the new operation ids: %w", err)
	}
	return out, nil
}

// AcceptItem is one record of an accept-as-new plan as its approver sees it:
// the new operation it runs under, what differs from the stored payload
// (pointer: stored -> incoming), or that the stored body was purged.
type AcceptItem struct {
	ID             int64  `json:"id"`
	Tenant         string `json:"tenant"`
	OperationID    string `json:"operation_id"`
	NewOperationID string `json:"new_operation_id"`
	Class          string `json:"class"`
	Status         Status `json:"status"`
	// Money says the incoming class moves money.
	Money bool `json:"money"`
	// StoredPurged: the stored payload was purged under a replay horizon;
	// there is nothing to compare the incoming one with.
	StoredPurged bool     `json:"stored_purged"`
	Changes      []Change `json:"changes"`
	// CannotRun says why the record cannot run under the plan's rule (its
	// new id is held by another payload), empty when it can.
	CannotRun string `json:"cannot_run,omitempty"`
}

// AcceptReview is an accept-as-new plan with what its run applies: each
// record's changed fields and, for money classes, the totals per currency
// of the records still open (the ones the run will apply). A record of a
// money class whose amount cannot be read is named in MoneyProblems.
type AcceptReview struct {
	AcceptPlan
	Records       []AcceptItem              `json:"records"`
	Open          int                       `json:"open"`
	Totals        []governance.Total        `json:"totals"`
	MoneyProblems []governance.MoneyProblem `json:"money_problems"`
	// Clashes are the open records that cannot run under the rule: a run
	// reaching one stops, so the plan runs only once they are left out.
	Clashes []Clash `json:"clashes"`
}

// ReviewAccept loads a plan and what its run applies.
func ReviewAccept(ctx context.Context, db idem.DBTX, id int64) (AcceptReview, error) {
	p, err := ShowAccept(ctx, db, id)
	if err != nil {
		return AcceptReview{}, err
	}
	return reviewOf(ctx, db, p)
}

// Review adds what p's run applies to an already loaded plan.
func Review(ctx context.Context, db idem.DBTX, p AcceptPlan) (AcceptReview, error) {
	return reviewOf(ctx, db, p)
}

func reviewOf(ctx context.Context, db idem.DBTX, p AcceptPlan) (AcceptReview, error) {
	r := AcceptReview{AcceptPlan: p, Records: []AcceptItem{}, Totals: []governance.Total{}, MoneyProblems: []governance.MoneyProblem{}}
	rows, err := db.Query(ctx, bulkAcceptReviewSQL, p.IDs)
	if err != nil {
		return AcceptReview{}, fmt.Errorf("review accept-as-new plan %d: %w", p.ID, err)
	}
	var totals governance.Totals
	var it AcceptItem
	var diff []byte
	var payload string
	var money *governance.Money
	_, err = pgx.ForEachRow(rows, []any{&it.ID, &it.Tenant, &it.OperationID, &it.Class, &it.Status, &it.StoredPurged,
		&diff, &payload, &money}, func() error {
		item := it
		item.NewOperationID, item.Money, item.Changes = NewOperationID(p.Rule, it.OperationID), money != nil, []Change{}
		if !item.StoredPurged {
			if err := json.Unmarshal(diff, &item.Changes); err != nil {
				return fmt.Errorf("record %d: decode the diff: %w", it.ID, err)
			}
		}
		if item.Status == StatusOpen {
			r.Open++
			totals.Add("record "+strconv.FormatInt(it.ID, 10)+" ("+it.Tenant+"/"+it.OperationID+")", money, []byte(payload))
		}
		r.Records = append(r.Records, item)
		money = nil
		return nil
	})
	if err != nil {
		return AcceptReview{}, fmt.Errorf("review accept-as-new plan %d: %w", p.ID, err)
	}
	r.Totals = totals.List()
	if totals.Problems != nil {
		r.MoneyProblems = totals.Problems
	}
	if r.Clashes, err = Clashes(ctx, db, p.IDs, p.Rule); err != nil {
		return AcceptReview{}, fmt.Errorf("review accept-as-new plan %d: %w", p.ID, err)
	}
	byID := make(map[int64]string, len(r.Clashes))
	for _, c := range r.Clashes {
		byID[c.ID] = c.Problem
	}
	for i := range r.Records {
		r.Records[i].CannotRun = byID[r.Records[i].ID]
	}
	return r, nil
}

// Summary renders a change as "pointer: stored -> incoming", each value cut
// to at most clip characters (0: whole); an absent side reads "(absent)".
func (c Change) Summary(clip int) string {
	path := c.Path
	if path == "" {
		path = "(whole payload)"
	}
	stored, incoming := clipValue(string(c.Stored), clip), clipValue(string(c.Incoming), clip)
	switch c.Kind {
	case "added":
		stored = "(absent)"
	case "removed":
		incoming = "(absent)"
	}
	return path + ": " + stored + " -> " + incoming
}

// Summary says what runs for the record: its changes one after the other,
// that its stored body was purged (nothing to compare with), or that it was
// decided meanwhile and will not run.
func (it AcceptItem) Summary(clip int) string {
	var s string
	switch {
	case it.StoredPurged:
		s = "stored body purged: no diff; the incoming payload runs as it is"
	case len(it.Changes) == 0:
		s = "no payload difference (the class differs)"
	default:
		parts := make([]string, len(it.Changes))
		for i, c := range it.Changes {
			parts[i] = c.Summary(clip)
		}
		s = strings.Join(parts, "; ")
	}
	if it.Status != StatusOpen {
		s = "already " + string(it.Status) + ", will not run; " + s
	}
	return s
}

func clipValue(s string, clip int) string {
	r := []rune(s)
	if clip <= 0 || len(r) <= clip {
		return s
	}
	return string(r[:clip-1]) + "…"
}

//go:embed sql/bulk_accept_list.sql
var bulkAcceptListSQL string

// ListAccept returns the newest accept-as-new plans (bulk, and single ones
// of money classes), at most limit.
func ListAccept(ctx context.Context, db idem.DBTX, limit int) ([]AcceptPlan, error) {
	rows, err := db.Query(ctx, bulkAcceptListSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("list accept-as-new plans: %w", err)
	}
	defer rows.Close()
	var out []AcceptPlan
	for rows.Next() {
		p, err := scanPlan(rows)
		if err != nil {
			return nil, fmt.Errorf("list accept-as-new plans: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
