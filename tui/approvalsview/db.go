package approvalsview

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/quarantine"
	"github.com/idemctl/idemctl/tui/view"
)

// ApprovalsDB is ApprovalService over packages quarantine (accept-as-new
// plans) and governance (record and import plans).
type ApprovalsDB struct{ Pool *pgxpool.Pool }

// approvalsLimit is how many plans of each kind the view lists.
const approvalsLimit = 20

// Plans lists the accept-as-new and entry plans, the ones waiting for a
// second person first, then newest first, each with its review.
func (a ApprovalsDB) Plans(ctx context.Context) ([]ApprovalPlan, error) {
	return view.Cleaned(a.plans(ctx))
}

func (a ApprovalsDB) plans(ctx context.Context) ([]ApprovalPlan, error) {
	accepts, err := quarantine.ListAccept(ctx, a.Pool, approvalsLimit)
	if err != nil {
		return nil, err
	}
	var out []ApprovalPlan
	for _, p := range accepts {
		r, err := quarantine.Review(ctx, a.Pool, p)
		if err != nil {
			return nil, err
		}
		out = append(out, AcceptApproval(r))
	}
	entries, err := governance.ListEntries(ctx, a.Pool, approvalsLimit)
	if err != nil {
		return nil, err
	}
	for _, r := range entries {
		out = append(out, EntryApproval(r))
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].planned() != out[j].planned() {
			return out[i].planned()
		}
		return out[i].ID > out[j].ID
	})
	return out, nil
}

// AcceptApproval is an accept-as-new plan's review as the view shows it.
func AcceptApproval(r quarantine.AcceptReview) ApprovalPlan {
	p := ApprovalPlan{Kind: KindAccept, ID: r.ID, State: r.State, Planned: personAt(r.PlannedPerson, r.PlannedDBUser),
		Approved: personAt(r.ApprovedPerson, r.ApprovedDBUser),
		Reason:   r.Reason, What: fmt.Sprintf("%d record(s) run as new operations, rule %s", len(r.IDs), r.Rule)}
	for _, t := range r.Totals {
		p.Totals = append(p.Totals, t.String())
	}
	for _, pr := range r.MoneyProblems {
		p.Problems = append(p.Problems, pr.String())
	}
	for _, it := range r.Records {
		item := ApprovalItem{Ref: "#" + strconv.FormatInt(it.ID, 10), Identity: it.Tenant + "/" + it.OperationID, Target: it.NewOperationID}
		switch {
		case it.Status != quarantine.StatusOpen:
			item.Lines = []string{"already " + string(it.Status) + ": will not run"}
		case it.StoredPurged:
			item.Lines = []string{"stored body purged: no diff; the incoming payload runs as it is"}
		case len(it.Changes) == 0:
			item.Lines = []string{"no payload difference (the class differs)"}
		}
		if it.Status == quarantine.StatusOpen && !it.StoredPurged {
			for _, c := range it.Changes {
				item.Lines = append(item.Lines, c.Summary(60))
			}
		}
		p.Items = append(p.Items, item)
	}
	return p
}

// EntryApproval is an entry plan's review as the view shows it.
func EntryApproval(r governance.EntryReview) ApprovalPlan {
	kind := KindRecord
	if r.Kind == governance.EntryImport {
		kind = KindImport
	}
	held := 0
	for _, e := range r.Entries {
		if e.Held != "" {
			held++
		}
	}
	what := fmt.Sprintf("%d identit(ies) enter without their effect, from %s", r.Items-held, r.Source)
	if held > 0 {
		what += fmt.Sprintf("; %d already in the inbox do not enter (named below)", held)
	}
	p := ApprovalPlan{Kind: kind, ID: r.ID, State: r.State, Planned: personAt(r.PlannedPerson, r.PlannedDBUser),
		Reason: r.Reason, What: what}
	if r.ApprovedPerson != nil {
		login := ""
		if r.ApprovedDBUser != nil {
			login = *r.ApprovedDBUser
		}
		p.Approved = personAt(*r.ApprovedPerson, login)
	}
	for _, t := range r.Totals {
		p.Totals = append(p.Totals, t.String())
	}
	for _, pr := range r.MoneyProblems {
		p.Problems = append(p.Problems, pr.String())
	}
	for _, e := range r.Entries {
		line := "evidence: " + e.Evidence
		if e.Amount != "" {
			line = e.Amount + "; " + line
		}
		if e.Outcome != "" {
			line += "; " + e.Outcome
		}
		switch e.Held {
		case "another payload":
			line += "; already in the inbox with another payload: not entered, quarantined at the run"
		case "same payload":
			line += "; already in the inbox with the same payload: not entered, left alone"
		}
		p.Items = append(p.Items, ApprovalItem{Ref: "item " + strconv.Itoa(e.Seq), Identity: e.TenantID + "/" + e.OperationID,
			Target: e.Class, Lines: []string{line}})
	}
	return p
}

func personAt(person, login string) string {
	if login == "" {
		return person
	}
	return person + " (" + login + ")"
}

// Approve is the second person's approval (quarantine.ApproveAccept,
// governance.ApproveEntry); the planner's person is refused with an error
// wrapping ErrSamePerson. An import plan is not approved here: its approval
// reads its source again (idemctl import approve), which the console does
// not hold (the database refuses it too).
func (a ApprovalsDB) Approve(ctx context.Context, kind PlanKind, id int64, operator string) error {
	var err error
	if kind == KindImport {
		return &governance.KindError{ID: id, Kind: governance.EntryImport, Step: "approve"}
	}
	if kind == KindAccept {
		_, err = quarantine.ApproveAccept(ctx, a.Pool, id, operator)
	} else {
		_, err = governance.ApproveEntry(ctx, a.Pool, id, operator)
	}
	if errors.Is(err, quarantine.ErrSamePerson) || errors.Is(err, governance.ErrSamePerson) {
		return fmt.Errorf("%w: %w", ErrSamePerson, err)
	}
	return err
}
