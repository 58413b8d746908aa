package governance_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/governance"
	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/internal/dbtest"
)

type fixture struct {
	ctx   context.Context
	dsn   string
	alice *pgxpool.Pool
	bob   *pgxpool.Pool
	app   *pgxpool.Pool
	// alice2 is a second login of alice's.
	alice2 *pgxpool.Pool
}

func setup(t *testing.T) *fixture {
	t.Helper()
	dsn := dbtest.NewDatabase(t)
	f := &fixture{ctx: context.Background(), dsn: dsn,
		alice:  dbtest.PoolAs(t, dsn, dbtest.Operator, 4),
		bob:    dbtest.PoolAs(t, dsn, dbtest.Operator2, 4),
		app:    dbtest.PoolAs(t, dsn, dbtest.App, 2),
		alice2: dbtest.PoolAs(t, dsn, dbtest.Unmapped, 2),
	}
	require.NoError(t, dbtest.Owner(dsn, "SELECT idem.person_add('alice', 'idemctl_test_unmapped')"))
	return f
}

func code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

var charge = &governance.Money{Amount: "/amount", Currency: "/currency", Unit: governance.Minor}

// One person declares a money class; removing or weakening the declaration
// needs a second person, compared by person: the same person through a
// second login is refused.
func TestMoneyDeclarationNeedsASecondPersonToWeaken(t *testing.T) {
	t.Parallel()
	f := setup(t)
	res, err := governance.SetMoney(f.ctx, f.alice, "demo.transfer", charge, "alice", "")
	require.NoError(t, err)
	assert.True(t, res.Applied, "a first declaration needs one person")
	got, err := governance.ClassMoney(f.ctx, f.alice, "demo.transfer")
	require.NoError(t, err)
	assert.Equal(t, charge, got)
	again, err := governance.SetMoney(f.ctx, f.alice, "demo.transfer", charge, "alice", "")
	require.NoError(t, err)
	assert.True(t, again.Applied, "the same declaration changes nothing")

	_, err = governance.SetMoney(f.ctx, f.alice, "demo.transfer", nil, "alice", "")
	assert.ErrorIs(t, err, governance.ErrRefused, "removal without a reason")
	res, err = governance.SetMoney(f.ctx, f.alice, "demo.transfer", nil, "alice", "moved to the ledger (CHG-1)")
	require.NoError(t, err)
	require.False(t, res.Applied)
	got, err = governance.ClassMoney(f.ctx, f.alice, "demo.transfer")
	require.NoError(t, err)
	assert.Equal(t, charge, got, "planned, not applied")

	for name, pool := range map[string]*pgxpool.Pool{"same login": f.alice, "second login of alice": f.alice2} {
		_, err = governance.ApproveChange(f.ctx, pool, res.ChangeID, "bob")
		assert.ErrorIs(t, err, governance.ErrSamePerson, name)
	}
	_, err = f.app.Exec(f.ctx, "SELECT idem.governed_change_approve($1, 'svc')", res.ChangeID)
	assert.Equal(t, "42501", code(err), "a service approves nothing")
	_, err = f.alice.Exec(f.ctx, "UPDATE idem.op_class SET money = NULL")
	assert.Equal(t, "42501", code(err), "nor does anyone write the class by hand")

	c, err := governance.ApproveChange(f.ctx, f.bob, res.ChangeID, "bob")
	require.NoError(t, err)
	assert.Equal(t, "approved", c.State)
	assert.Equal(t, dbtest.PersonOperator, c.PlannedPerson)
	assert.Equal(t, dbtest.PersonOperator2, *c.ApprovedPerson)
	got, err = governance.ClassMoney(f.ctx, f.alice, "demo.transfer")
	require.NoError(t, err)
	assert.Nil(t, got, "approved: applied")
	_, err = governance.ApproveChange(f.ctx, f.bob, res.ChangeID, "bob")
	assert.ErrorIs(t, err, governance.ErrState, "once")
	var persons []string
	rows, err := f.alice.Query(f.ctx, "SELECT person FROM idem.audit WHERE action = 'class.money.set' ORDER BY id")
	require.NoError(t, err)
	for rows.Next() {
		var p string
		require.NoError(t, rows.Scan(&p))
		persons = append(persons, p)
	}
	assert.Equal(t, []string{"alice", "bob"}, persons, "declared by alice, removal applied by bob's approval")
}

// Weakening a declaration (another pointer) is a change too, and a change
// whose target moved since it was planned is refused.
func TestMoneyChangeRefusedWhenStale(t *testing.T) {
	t.Parallel()
	f := setup(t)
	_, err := governance.SetMoney(f.ctx, f.alice, "demo.transfer", charge, "alice", "")
	require.NoError(t, err)
	first, err := governance.SetMoney(f.ctx, f.alice, "demo.transfer", &governance.Money{Amount: "/x", Currency: "/currency", Unit: "major"}, "alice", "rename")
	require.NoError(t, err)
	second, err := governance.SetMoney(f.ctx, f.bob, "demo.transfer", nil, "bob", "drop it")
	require.NoError(t, err)
	require.False(t, first.Applied)
	_, err = governance.ApproveChange(f.ctx, f.bob, first.ChangeID, "bob")
	require.NoError(t, err)
	_, err = governance.ApproveChange(f.ctx, f.alice, second.ChangeID, "alice")
	assert.ErrorIs(t, err, governance.ErrStale)
	c, err := governance.AbortChange(f.ctx, f.alice, second.ChangeID, "alice", "stale")
	require.NoError(t, err)
	assert.Equal(t, "aborted", c.State)
	_, err = governance.SetMoney(f.ctx, f.alice, "demo.transfer", &governance.Money{Amount: "amount", Currency: "/c", Unit: "minor"}, "alice", "x")
	assert.ErrorIs(t, err, governance.ErrRefused, "a pointer starts with /")
	_, err = governance.SetMoney(f.ctx, f.app, "demo.transfer", charge, "svc", "")
	assert.Equal(t, "42501", code(errors.Unwrap(err)), "a service declares nothing")
}

// Removing a replay source needs a second person, and the removal is listed
// for the purge plans made after it.
func TestSourceRemovalNeedsASecondPerson(t *testing.T) {
	t.Parallel()
	f := setup(t)
	start := time.Now().Add(-time.Minute)
	require.NoError(t, horizon.AddSource(f.ctx, f.alice, horizon.Source{Name: "dlq", Kind: horizon.KindArchive,
		Config: horizon.SourceConfig{Dir: "/var/dlq"}}, "alice"))
	_, err := horizon.RemoveSource(f.ctx, f.alice, "dlq", "alice", "")
	assert.ErrorIs(t, err, governance.ErrRefused, "a reason is required")
	c, err := horizon.RemoveSource(f.ctx, f.alice, "dlq", "alice", "decommissioned")
	require.NoError(t, err)
	list, err := horizon.ListSources(f.ctx, f.alice)
	require.NoError(t, err)
	assert.Len(t, list, 2, "planned: the source is still there")
	_, err = governance.ApproveChange(f.ctx, f.alice2, c.ID, "bob")
	assert.ErrorIs(t, err, governance.ErrSamePerson)
	_, err = governance.ApproveChange(f.ctx, f.bob, c.ID, "bob")
	require.NoError(t, err)
	list, err = horizon.ListSources(f.ctx, f.alice)
	require.NoError(t, err)
	assert.Len(t, list, 1, "approved: removed")
	removed, err := governance.SourcesRemovedSince(f.ctx, f.alice, start)
	require.NoError(t, err)
	require.Len(t, removed, 1)
	assert.Equal(t, "dlq", removed[0].Target)
	removed, err = governance.SourcesRemovedSince(f.ctx, f.alice, time.Now().Add(time.Minute))
	require.NoError(t, err)
	assert.Empty(t, removed)
}
