package importer_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/importer"
	"github.com/idemctl/idemctl/internal/dbtest"
)

// A login that may not run or approve, a plan at the wrong step, the
// planner approving, or an unknown class: refused before the source is
// opened (idem.import_plan_ready; the class in the plan's first call), so a
// long read is never wasted on a refusal.
func TestImportRefusedBeforeTheSourceIsRead(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rocketSetup(t, f)
	path := storeFile(t, 5)
	read := 0
	never := func(context.Context, *importer.Cursor, bool) (importer.Source, error) {
		read++
		return nil, errors.New("the source was opened")
	}
	r, err := importer.Plan(f.ctx, f.alice, importer.File(path), importer.PlanOptions{Class: rideCharge, Correction: ridesLedger,
		Operator: "alice", Reason: "adopt"}, importer.Sinks{})
	require.NoError(t, err)
	id := r.Plan.ID

	_, err = importer.Run(f.ctx, f.alice, id, "alice", never)
	assert.ErrorIs(t, err, governance.ErrState, "not approved yet")
	assert.ErrorContains(t, err, "idemctl import approve")
	_, err = importer.Approve(f.ctx, f.alice, id, "alice", never)
	assert.ErrorIs(t, err, governance.ErrSamePerson, "the planner")
	unmapped := dbtest.PoolAs(t, f.dsn, dbtest.Unmapped, 1)
	_, err = importer.Approve(f.ctx, unmapped, id, "carol", never)
	assert.ErrorIs(t, err, governance.ErrNoPerson)
	app := dbtest.PoolAs(t, f.dsn, dbtest.App, 1)
	_, err = importer.Approve(f.ctx, app, id, "svc", never)
	assert.ErrorIs(t, err, governance.ErrNotOperator)

	_, err = importer.Approve(f.ctx, f.bob, id, "bob", importer.File(path))
	require.NoError(t, err)
	_, err = importer.Run(f.ctx, unmapped, id, "carol", never)
	assert.ErrorIs(t, err, governance.ErrNoPerson)
	_, err = importer.Run(f.ctx, app, id, "svc", never)
	assert.ErrorIs(t, err, governance.ErrNotOperator)
	auditor := dbtest.PoolAs(t, f.dsn, dbtest.Auditor, 1)
	_, err = importer.Run(f.ctx, auditor, id, "aud", never)
	assert.ErrorIs(t, err, governance.ErrNotOperator)

	_, err = importer.Plan(f.ctx, f.alice, never, importer.PlanOptions{Class: "rides.nope", Operator: "alice", Reason: "x"}, importer.Sinks{})
	assert.ErrorIs(t, err, governance.ErrUnknownClass)
	assert.ErrorContains(t, err, "--class: unknown operation class: rides.nope (idemctl class list shows them); nothing read")
	assert.Zero(t, read, "no refusal opened the source")

	done, err := importer.Run(f.ctx, f.bob, id, "bob", importer.File(path))
	require.NoError(t, err, "the approved plan still runs")
	assert.Equal(t, "done", done.State)
}
