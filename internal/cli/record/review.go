package record

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// showEntry prints an entry plan with its money totals, and its identities
// as PrintEntryReview does (0: its sample).
func showEntry(ctx context.Context, f *cmdutil.Factory, db governance.DBTX, p governance.EntryPlan, items int) error {
	r, err := governance.ReviewEntry(ctx, db, p)
	if err != nil {
		return cmdutil.GovernanceErr(err)
	}
	if f.JSON() {
		return cmdutil.PrintJSONLine(f.IO.Out, r)
	}
	return PrintEntryReview(f.IO.Out, r, items)
}

// entryTotals says what a plan records in money: "EUR 9.00 over 1
// record; ...", "-" when no item is of a money class.
func entryTotals(r governance.EntryReview) string {
	parts := make([]string, 0, len(r.Totals)+1)
	for _, t := range r.Totals {
		parts = append(parts, t.String())
	}
	n := 0
	for _, p := range r.MoneyProblems {
		n += max(p.Records, 1)
	}
	if n > 0 {
		parts = append(parts, fmt.Sprintf("%d item(s) of a money class not in the totals", n))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

// PrintEntryReview prints an entry plan as a table with its money totals;
// then, for items > 0, its first items identities (-1: all), each with its
// class, amount, evidence and outcome.
func PrintEntryReview(w io.Writer, r governance.EntryReview, items int) error {
	approved := "-"
	if r.ApprovedPerson != nil {
		approved = audit.Who(*r.ApprovedPerson, cmdutil.Deref(r.ApprovedDBUser))
	}
	rows := [][]string{
		{"plan", strconv.FormatInt(r.ID, 10)},
		{"kind", r.Kind},
		{"state", r.State},
		{"source", r.Source},
		{"digest", r.SourceDigest},
		{"counts", string(r.Counts)},
		{"reason", r.Reason},
		{"contract", derefOr(r.Contract)},
		{"correction", derefOr(r.Correction)},
		{"planned by", audit.Who(r.PlannedPerson, r.PlannedDBUser)},
		{"approved by", approved},
		{"entered", fmt.Sprintf("%d (%d not entered: left alone, quarantined or refused)", r.Entered, r.LeftAlone)},
		{"money", entryTotals(r)},
	}
	if r.AbortReason != nil {
		rows = append(rows, []string{"aborted", *r.AbortReason})
	}
	if r.Cursor != nil {
		rows = append(rows, []string{"cursor", *r.Cursor})
	}
	if r.HashFunction != nil {
		rows = append(rows, []string{"hash function", *r.HashFunction})
	}
	if r.ItemsDigest != nil {
		// what an import's approval compares with its source (hex, whole)
		rows = append(rows, []string{"items digest", *r.ItemsDigest})
	}
	for _, p := range r.MoneyProblems {
		rows = append(rows, []string{"not in totals", p.String()})
	}
	if err := cmdutil.PrintTable(w, []string{"field", "value"}, rows); err != nil {
		return err
	}
	if items == 0 {
		return printEntrySample(w, r.Sample)
	}
	if len(r.Entries) == 0 {
		return nil
	}
	shown := r.Entries
	if items > 0 && len(shown) > items {
		shown = shown[:items]
	}
	total := len(r.Entries)
	if r.Kind == governance.EntryImport {
		total = r.NotEntered
		fmt.Fprintf(w, "\nRows that did not enter (%d of %d):\n", len(shown), total)
	} else {
		fmt.Fprintf(w, "\nIdentities (%d of %d):\n", len(shown), total)
	}
	table := make([][]string, 0, len(shown))
	for _, e := range shown {
		outcome := cmdutil.OrDash(e.Outcome)
		if e.Held != "" {
			outcome = "held: " + heldFate(e.Held)
		}
		table = append(table, []string{strconv.Itoa(e.Seq), e.TenantID, e.OperationID, e.Class, cmdutil.OrDash(e.Amount),
			e.Evidence, cmdutil.ClipText(cmdutil.OrDash(string(e.Response)), responseCell), outcome})
	}
	// the response retries will get back, clipped (-o json has it whole);
	// hidden first on a narrow terminal, which says so (-o wide)
	if err := cmdutil.PrintTable(w, []string{"item", "tenant", "operation", "class", "amount", "evidence", "retry answer", "outcome"}, table); err != nil {
		return err
	}
	if len(shown) < len(r.Entries) {
		_, err := fmt.Fprintf(w, "and %d more: idemctl record show %d lists them all (-o json too)\n", total-len(shown), r.ID)
		return err
	}
	if len(shown) < total {
		_, err := fmt.Fprintf(w, "and %d more, not listed: the plan's item rows (idem.entry_item, outcome not null) hold them all\n", total-len(shown))
		return err
	}
	return nil
}

// responseCell is how much of an item's response its row shows.
const responseCell = 32

func derefOr(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

// printEntrySample prints an entry plan's sample as a table of its own: its
// tenants and operation ids are identifiers, kept whole (a table too narrow
// for them turns vertical), where the JSON text in a wrapping value column
// was split inside an id.
func printEntrySample(w io.Writer, raw json.RawMessage) error {
	var items []struct {
		TenantID    string `json:"tenant_id"`
		OperationID string `json:"operation_id"`
		Class       string `json:"class"`
		Evidence    string `json:"evidence"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return fmt.Errorf("the plan's sample: %w", err)
	}
	if len(items) == 0 {
		return nil
	}
	rows := make([][]string, 0, len(items))
	for _, it := range items {
		rows = append(rows, []string{it.TenantID, it.OperationID, it.Class, cmdutil.OrDash(it.Evidence)})
	}
	fmt.Fprintln(w, "sample (the plan's first identities):")
	return cmdutil.PrintTable(w, []string{"tenant", "operation", "class", "evidence"}, rows)
}
