package tui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/horizon"
	"github.com/idemctl/idemctl/idem"
	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/reconcile"
	"github.com/idemctl/idemctl/tui/styles"
)

// A saved mapping run from the view against a real database: the counts
// and the discrepancies show, one opens, and p pins it. The tenant holds a
// bidirectional control: the screen shows it escaped, the pin names the
// identity as it is.
func TestModelReconcileRunOpenPin(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewPool(t, 4)
	app := dbtest.PoolAs(t, dsn, dbtest.App, 1)
	tenant := "acme\u202e"
	for op, amount := range map[string]int{"p-1": 100, "p-2": 200} {
		_, err := idem.Execute(context.Background(), app, idem.Command{Identity: idem.Identity{TenantID: tenant, OperationID: op},
			Class: "demo.transfer", Payload: []byte(fmt.Sprintf(`{"from":"a","to":"b","amount":%d,"currency":"EUR"}`, amount))})
		require.NoError(t, err)
	}
	dir := t.TempDir()
	report := filepath.Join(dir, "settlement.csv")
	require.NoError(t, os.WriteFile(report, []byte("merchant,reference,amount_minor\n"+tenant+",p-1,100\n"+tenant+",p-2,250\n"), 0o600))
	require.NoError(t, reconcile.SaveMapping(filepath.Join(dir, "psp.json"), reconcile.Mapping{Class: "demo.transfer",
		Report: "settlement.csv", Key: "tenant=merchant,operation_id=reference", Compare: "/amount=amount_minor"}, false))

	st := styles.Ascii()
	services := PoolServices(pool)
	services.Reconcile = ReconcileDB{Pool: pool, Dir: dir}
	h := &harness{t: t, pool: pool, dsn: dsn, m: New(Options{Services: services, Operator: "alice", Database: "test",
		Now: func() time.Time { return fixedNow }, Styles: &st, Refresh: -1, StepDelay: -1, Timeout: 20 * time.Second})}
	h.send(tea.WindowSizeMsg{Width: 100, Height: 30})
	h.init()
	h.keys("5")
	require.Contains(t, h.view(), "psp")
	h.keys("enter")
	v := h.view()
	assert.Contains(t, v, "1 discrepancies; recorded as audit row")
	assert.Contains(t, v, `acme\u202e/p-2`)
	assert.NotContains(t, v, "\u202e")
	h.keys("enter")
	assert.Contains(t, h.view(), "/amount")
	h.keys("p")
	assert.Contains(t, h.view(), "Confirm: pin")
	h.keys("y")
	assert.Contains(t, h.view(), "pinned as correction #")

	cs, err := horizon.ListCorrections(context.Background(), pool, false)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.Equal(t, tenant, cs[0].Tenant, "the real identity is pinned")
	assert.Equal(t, "p-2", cs[0].Operation)
	assert.True(t, strings.HasPrefix(cs[0].Reason, "reconcile settlement.csv line 3: mismatch: /amount: inbox 200, report 250"), cs[0].Reason)

	h.keys("p")
	assert.Contains(t, h.view(), "already pinned as correction #")
	h.keys("esc", "esc")
	assert.Contains(t, h.view(), "saved mappings")
}
