package governance

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
)

// importMoney is what an import plan's seal added up of its staged rows
// (counts.money, idem.import_stage_money): sums in the declared unit.
type importMoney struct {
	Unit       string `json:"unit"`
	Currencies []struct {
		Currency string `json:"currency"`
		Amount   string `json:"amount"`
		Records  int    `json:"records"`
		// Negative and NegativeRecords: the rows with a negative amount
		// (sealed by an older idemctl: absent, none told).
		Negative        string `json:"negative"`
		NegativeRecords int    `json:"negative_records"`
	} `json:"currencies"`
	Unread      int `json:"unread"`
	FirstUnread *struct {
		N           int64  `json:"n"`
		TenantID    string `json:"tenant_id"`
		OperationID string `json:"operation_id"`
	} `json:"first_unread"`
}

// reviewImport adds an import plan's money totals, per currency, from
// what its seal added up of the rows it holds (an import's rows are not
// loaded: a store's whole history). A plan of a money class sealed without
// them says why as a problem (noImportTotals).
func reviewImport(ctx context.Context, db DBTX, r EntryReview) (EntryReview, error) {
	counts, err := importCounts(r.EntryPlan)
	if err != nil {
		return EntryReview{}, err
	}
	if counts.Money != nil {
		r.Totals, r.MoneyProblems = counts.Money.totals()
		return r, nil
	}
	classes := make([]string, 0, len(counts.Classes))
	for c := range counts.Classes {
		classes = append(classes, c)
	}
	var money int
	if len(classes) > 0 {
		if err := db.QueryRow(ctx, "SELECT count(*) FROM idem.op_class WHERE name = ANY($1) AND money IS NOT NULL", classes).Scan(&money); err != nil {
			return EntryReview{}, fmt.Errorf("entry plan %d's classes: %w", r.ID, err)
		}
	}
	if money > 0 {
		r.MoneyProblems = append(r.MoneyProblems, MoneyProblem{Ref: "its " + fmt.Sprint(r.Items) + " items", Records: r.Items,
			Problem: noImportTotals(r.EntryPlan)})
	}
	return r, nil
}

// noImportTotals says why an import plan of a money class has no totals.
// A staged plan's seal (idem.import_plan_seal_stage) added up the amounts
// when its class was money then: the class became one after the seal. A
// plan with one items digest and no stage was sealed by an older idemctl,
// before seals added amounts up; any other (on Citus) keeps a fingerprint
// an item, and no payloads to add up.
func noImportTotals(p EntryPlan) string {
	switch {
	case p.Staged:
		return "a money class now, not when the plan was sealed (the seal adds up the amounts of a class that is money then): check the amounts in the source"
	case p.ItemsDigest != nil:
		return "a money class, and the plan was sealed by an older idemctl, whose seal added up no amounts: check the amounts in the source"
	}
	return "a money class, and the plan keeps a fingerprint an item (sealed on Citus), no payloads to add up: check the amounts in the source"
}

type importPlanCounts struct {
	Classes map[string]int `json:"classes"`
	Money   *importMoney   `json:"money"`
}

func importCounts(p EntryPlan) (importPlanCounts, error) {
	var counts importPlanCounts
	if len(p.Counts) > 0 {
		if err := json.Unmarshal(p.Counts, &counts); err != nil {
			return counts, fmt.Errorf("entry plan %d's counts: %w", p.ID, err)
		}
	}
	return counts, nil
}

// ReviewImport is an import plan with the money totals its seal added up
// (none when it is of no money class, or sealed without them: ReviewEntry
// then names the problem), without a query.
func ReviewImport(p EntryPlan) EntryReview {
	r := EntryReview{EntryPlan: p, Entries: []EntryLine{}, Totals: []Total{}, MoneyProblems: []MoneyProblem{}}
	if counts, err := importCounts(p); err == nil && counts.Money != nil {
		r.Totals, r.MoneyProblems = counts.Money.totals()
	}
	return r
}

// totals converts the seal's sums to the currencies' major units; a
// currency that is not ISO 4217 and the rows whose amount could not be
// read are problems, never silently left out.
func (m importMoney) totals() ([]Total, []MoneyProblem) {
	totals, problems := []Total{}, []MoneyProblem{}
	for _, c := range m.Currencies {
		exp, known := MinorUnits(c.Currency)
		sum, ok := new(big.Rat).SetString(c.Amount)
		switch {
		case !known || exp == NoMinorUnit:
			problems = append(problems, MoneyProblem{Ref: fmt.Sprintf("%d rows", c.Records), Records: c.Records,
				Problem: fmt.Sprintf("the currency %q is not an ISO 4217 currency", c.Currency)})
			continue
		case !ok:
			problems = append(problems, MoneyProblem{Ref: fmt.Sprintf("%d rows in %s", c.Records, c.Currency), Records: c.Records,
				Problem: fmt.Sprintf("their sum %q is not a number", c.Amount)})
			continue
		}
		neg, _ := new(big.Rat).SetString(c.Negative)
		if m.Unit == Minor {
			unit := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(exp)), nil))
			sum.Quo(sum, unit)
			if neg != nil {
				neg.Quo(neg, unit)
			}
		}
		totals = append(totals, Total{Currency: c.Currency, Amount: formatMajor(sum, c.Currency), Records: c.Records}.
			withNegative(neg, c.NegativeRecords))
	}
	sort.Slice(totals, func(i, j int) bool { return totals[i].Currency < totals[j].Currency })
	if m.Unread > 0 {
		ref := fmt.Sprintf("%d rows", m.Unread)
		if f := m.FirstUnread; f != nil {
			ref += fmt.Sprintf(" (the first: row %d, %s/%s)", f.N, f.TenantID, f.OperationID)
		}
		problems = append(problems, MoneyProblem{Ref: ref, Records: m.Unread,
			Problem: "no amount and currency readable by the class's declaration (or no payload: a hash-only row)"})
	}
	return totals, problems
}
