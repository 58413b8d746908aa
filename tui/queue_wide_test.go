package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// With identities below their rows, a record takes several lines: paging
// counts them, so the cursor's row (and its identity) stays on the screen
// down to the last record.
func TestQueueWideRowsKeepTheCursorOnScreen(t *testing.T) {
	t.Parallel()
	q := newFixedQuarantine()
	r := q.records[11]
	r.Tenant = "tenant-with-a-rather-long-name-0123456789"
	r.OperationID = "op-0123456789abcdef0123456789abcdef0123456789abcdef-end"
	q.records[11] = r
	// Six more records, older: nine in all, more than the list's lines hold
	// at three lines a record.
	for i := int64(20); i < 26; i++ {
		x := q.records[9]
		x.ID, x.OperationID = i, fmt.Sprintf("old-%d", i)
		x.LastSeen = x.LastSeen.Add(-time.Duration(i) * time.Hour)
		q.records[i] = x
	}
	h := fixtureHarness(t, goldenSetup{quarantine: q}, 80, 16)
	for i := 0; i < 8; i++ {
		v := h.view()
		assert.Contains(t, v, ">", "the cursor's row is shown after %d moves:\n%s", i, v)
		assertFits(t, v, 80)
		h.keys("down")
	}
	v := h.view()
	assert.Contains(t, v, "> ", v)
	assert.Contains(t, v, "acme/old-25", "the last (oldest) record's identity, with its row")
	assert.Equal(t, 16, len(strings.Split(v, "\n")))
	t.Log("\n" + v)
}
