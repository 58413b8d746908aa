package tui

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// rv finding: docs/quarantine.md says the queue's list "never cuts what an
// operator types or cites next (an id ...)". An identity wider than the
// terminal (a 41-character tenant and a 54-character operation id, both
// valid) is cut with "…" at 80 columns, and the CLASS column after it is
// cut away without being named in the title (which names only "last seen,
// seen, status"). The evidence screen (enter) cuts the same operation id in
// its first line: seen by hand with tmux at 80x30.
func TestRVQueueCutsAnIdentityWiderThanTheTerminal(t *testing.T) {
	t.Parallel()
	q := newFixedQuarantine()
	r := q.records[11]
	r.Tenant = "tenant-with-a-rather-long-name-0123456789"
	r.OperationID = "op-0123456789abcdef0123456789abcdef0123456789abcdef-end"
	q.records[11] = r
	h := fixtureHarness(t, goldenSetup{quarantine: q}, 80, 24)
	v := h.view()
	assert.Contains(t, v, r.Tenant+"/"+r.OperationID, "the identity is whole (wrapped, or on a line of its own)")
	for _, l := range strings.Split(v, "\n")[4:8] {
		assert.NotContains(t, l, "…", "a row is never cut: %s", l)
	}
	t.Log("\n" + v)
}
