package tui

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/tui/styles"
)

// flakyAudit fails its loads while fail is set.
type flakyAudit struct {
	fixedAudit
	mu   sync.Mutex
	fail error
}

func (a *flakyAudit) List(ctx context.Context, f audit.Filter) ([]audit.Record, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail != nil {
		return nil, a.fail
	}
	return a.fixedAudit.List(ctx, f)
}

// Every list view loads through one view.Loader: a load that failed says
// so, and once a load succeeds its error goes (the horizon view's test is
// TestHorizonFixes).
func TestListLoadErrorGoesOnceALoadSucceeds(t *testing.T) {
	t.Parallel()
	au := &flakyAudit{fail: errors.New("dial tcp 10.0.0.5:5432: connect: connection refused")}
	st := styles.Ascii()
	m := New(Options{Services: Services{Audit: au}, Operator: "alice", Database: fixedDB,
		Now: func() time.Time { return fixedNow }, Styles: &st, Refresh: -1})
	h := &harness{t: t, m: m}
	h.send(tea.WindowSizeMsg{Width: 120, Height: 30})
	h.keys("4")
	require.Contains(t, h.view(), "load the audit log: dial tcp 10.0.0.5:5432: connect: connection refused")
	au.mu.Lock()
	au.fail = nil
	au.mu.Unlock()
	h.keys("r")
	v := h.view()
	assert.NotContains(t, v, "connection refused", "a stale error after a successful refresh")
	assert.Contains(t, v, "chain intact")
}
