package tui

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemctl/idemctl/tui/approvalsview"
)

// fixedApprovals lists plans and counts the approvals asked of it.
type fixedApprovals struct {
	plans    []approvalsview.ApprovalPlan
	approved int
}

func (f *fixedApprovals) Plans(context.Context) ([]approvalsview.ApprovalPlan, error) {
	return f.plans, nil
}
func (f *fixedApprovals) Approve(context.Context, approvalsview.PlanKind, int64, string) error {
	f.approved++
	return nil
}

// An import plan is not approved in the console (its approval reads the
// source again): the view does not offer "a approve" for it, says up front
// how to approve it (the command, with its id), never asks "y approve", and
// asks the service for nothing. A record plan still offers it.
func TestApprovalsDoNotOfferToApproveAnImport(t *testing.T) {
	t.Parallel()
	svc := &fixedApprovals{plans: []approvalsview.ApprovalPlan{
		{Kind: approvalsview.KindImport, ID: 7, State: "planned", Planned: "alice (op1)", Reason: "adopt", What: "24 identit(ies) enter without their effect"},
		{Kind: approvalsview.KindRecord, ID: 6, State: "planned", Planned: "alice (op1)", Reason: "INC-9", What: "1 identit(ies) enter without their effect"},
	}}
	h := fixtureHarness(t, goldenSetup{approvals: svc}, 120, 30)
	h.keys("6")
	v := h.view()
	assert.NotContains(t, lastLine(v), "approve", "the cursor is on the import: no approve key offered")
	h.keys("a")
	v = h.view()
	assert.Contains(t, v, "idemctl import approve 7", "a says how, instead of a confirmation")
	assert.NotContains(t, v, "y approve")
	h.keys("enter")
	v = h.view()
	assert.Contains(t, strings.Join(strings.Fields(v), " "), "approve import plan #7 is approved with idemctl import approve 7 and its source",
		"the opened plan says how to approve it, up front")
	assert.NotContains(t, lastLine(v), "approve")
	h.keys("a")
	assert.NotContains(t, h.view(), "y approve", "no confirmation for an import")
	assert.Zero(t, svc.approved, "nothing asked of the service")

	h.keys("esc", "down")
	assert.Contains(t, lastLine(h.view()), "approve", "a record plan is still approved here")
}
