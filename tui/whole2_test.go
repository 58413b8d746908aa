package tui

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// docs/quarantine.md says the queue's list "never cuts what an
// operator types or cites next (an id ...)". An identity wider than the
// terminal (a 41-character tenant and a 54-character operation id, both
// valid) is cut with "…" at 80 columns, and the CLASS column after it is
// cut away without being named in the title (which names only "last seen,
// seen, status"). The evidence screen (enter) cuts the same operation id in
// its first line: seen by hand with tmux at 80x30.
func TestQueueCutsAnIdentityWiderThanTheTerminal(t *testing.T) {
	t.Parallel()
	q := newFixedQuarantine()
	r := q.records[11]
	r.Tenant = "tenant-with-a-rather-long-name-0123456789"
	r.OperationID = "op-0123456789abcdef0123456789abcdef0123456789abcdef-end"
	q.records[11] = r
	h := fixtureHarness(t, goldenSetup{quarantine: q}, 80, 24)
	v := h.view()
	// Not tenant+"/"+operation as one string: 96
	// cells cannot stand on one line of an 80-column terminal (bubbletea
	// cuts a line at the width). Wrapped, its parts are each whole: the
	// tenant with its "/" on one line, the operation id on the next.
	lines := strings.Split(v, "\n")
	trimmed := make([]string, len(lines))
	for i, l := range lines {
		trimmed[i] = strings.TrimSpace(l)
	}
	assert.Contains(t, trimmed, r.Tenant+"/", "the tenant whole, on a line of its own under its row")
	assert.Contains(t, trimmed, r.OperationID, "the operation id whole, on the next")
	for _, l := range lines[4:12] {
		assert.NotContains(t, l, "…", "a row is never cut: %s", l)
	}
	assert.Contains(t, lines[2], "identity below each row", "the title says where the identities went")
	assert.Contains(t, lines[4], "CLASS", "the class column is shown (or named as hidden)")
	assert.Contains(t, v, "acme/charge-42", "the other records keep their identities")
	assertFits(t, v, 80)
	t.Log("\n" + v)

	// The evidence screen: its first line names the record; the identity,
	// too wide for it, on lines of its own, whole.
	h.keys("down", "enter")
	v = h.view()
	assert.Contains(t, v, r.Tenant+"/\n", "the evidence screen's tenant whole")
	assert.Contains(t, v, r.OperationID, "the evidence screen's operation id whole")
	assert.NotContains(t, strings.Split(v, "\n")[2], "…")
	assertFits(t, v, 80)
	t.Log("\n" + v)
}
