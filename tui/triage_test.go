package tui

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/audit"
	"github.com/idemctl/idemctl/internal/dbtest"
)

func (h *harness) count(sql string, args ...any) int {
	h.t.Helper()
	var n int
	require.NoError(h.t, h.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// The queue searches on the server: a record far below the newest 500 is
// found; ] pages through to the very last record; the title shows the total.
func TestModelQueueSearchAndPagesOnTheServer(t *testing.T) {
	t.Parallel()
	h := setup(t)
	dbtest.SeedConflicts(t, h.dsn, dbtest.ClientBug{Prefix: "s-", Tenants: 7, N: 650, Change: "amount", Source: "mobile"})
	h.init()
	v := h.view()
	assert.Contains(t, v, "650 records")
	assert.Contains(t, v, "page 1")
	assert.Contains(t, v, "oldest open")
	assert.NotContains(t, v, "/s-00001 ", "the oldest record is not on the first page")

	// Search: the oldest record, far below the newest 500.
	h.keys("/")
	h.typ("s-00001")
	h.keys("enter")
	v = h.view()
	assert.Contains(t, v, "tenant-1/s-00001")
	assert.Contains(t, v, "1 record")
	assert.Contains(t, v, "search s-00001")
	h.keys("/")
	h.typ("x bogus:1")
	h.keys("enter")
	assert.Contains(t, h.view(), "error: search")
	h.keys("esc", "esc")
	h.keys("/")
	h.typ(" ")
	h.keys("enter") // an empty search lists everything again
	assert.Contains(t, h.view(), "650 records")

	// Paging: ] to the last page, which holds the oldest record.
	for i := 0; i < 6; i++ {
		h.keys("]")
	}
	h.keys("G") // the last row of the last page
	v = h.view()
	assert.Contains(t, v, "page 7")
	assert.Contains(t, v, "tenant-1/s-00001")
	h.keys("]")
	assert.Contains(t, h.view(), "this is the last page")
	h.keys("[")
	assert.Contains(t, h.view(), "page 6")
}

// A group is rejected from the TUI with a preview and a confirmation: exactly
// its records, each with its own audit row; the other group stays open.
func TestModelGroupReject(t *testing.T) {
	t.Parallel()
	h := setup(t)
	dbtest.SeedConflicts(t, h.dsn,
		dbtest.ClientBug{Prefix: "m-", Tenants: 3, N: 40, Change: "amount", Source: "mobile"},
		dbtest.ClientBug{Prefix: "w-", Tenants: 2, N: 25, Change: "currency", Source: "web"})
	h.init()
	h.keys("v")
	v := h.view()
	assert.Contains(t, v, "Open records by cause")
	assert.Contains(t, v, "65 records in 2 groups")
	assert.Contains(t, v, "/currency")
	// The groups are largest first: the second is the web client's.
	h.keys("down", "x")
	require.True(t, h.m.queue.Typing())
	h.keys("enter")
	assert.Contains(t, h.view(), "a reason is required", "enter with an empty reason says why nothing happens")
	h.typ("web currency bug INC-881")
	h.keys("enter")
	v = h.view()
	assert.Contains(t, v, "open records")
	assert.Contains(t, v, "25")
	assert.Contains(t, v, "changed /currency")
	assert.Equal(t, 0, h.count("SELECT count(*) FROM idem.quarantine WHERE status <> 'open'"), "nothing before the confirmation")
	// Three records of the same cause arrive between the preview and the
	// confirmation: the run decides what was previewed, not the group now.
	dbtest.SeedConflicts(t, h.dsn, dbtest.ClientBug{Prefix: "w2-", Tenants: 1, N: 3, Change: "currency", Source: "web"})

	h.keys("y")
	assert.Contains(t, h.view(), "ok: rejected 25 records")
	assert.Equal(t, 25, h.count("SELECT count(*) FROM idem.quarantine WHERE status = 'rejected' AND operation_id LIKE 'w-%'"))
	assert.Equal(t, 3, h.count("SELECT count(*) FROM idem.quarantine WHERE status = 'open' AND operation_id LIKE 'w2-%'"),
		"records that joined the group after the preview are not decided")
	assert.Equal(t, 43, h.count("SELECT count(*) FROM idem.quarantine WHERE status = 'open'"))
	assert.Equal(t, 25, h.count(`SELECT count(DISTINCT target) FROM idem.audit WHERE action = 'quarantine.reject'
		AND details::jsonb ->> 'reason' = 'web currency bug INC-881' AND person = 'alice'`))
	report, err := audit.Verify(context.Background(), h.pool)
	require.NoError(t, err)
	assert.True(t, report.Intact)
}

// Space selects records; x rejects the selection together.
func TestModelMultiSelectReject(t *testing.T) {
	t.Parallel()
	h := setup(t)
	dbtest.SeedConflicts(t, h.dsn, dbtest.ClientBug{Prefix: "m-", N: 5, Change: "amount", Source: "mobile"})
	h.init()
	h.keys(" ", " ")
	v := h.view()
	assert.Contains(t, v, "2 selected")
	assert.Equal(t, 2, strings.Count(v, ">*")+strings.Count(v, " *"), v)
	h.keys("x")
	h.typ("duplicates INC-9")
	h.keys("enter", "y")
	assert.Contains(t, h.view(), "ok: rejected 2 records")
	assert.Equal(t, 2, h.count("SELECT count(*) FROM idem.quarantine WHERE status = 'rejected'"))
	assert.Equal(t, []string{"m-00004", "m-00005"}, h.rejectedOps())
	assert.NotContains(t, h.view(), "selected", "the selection is cleared")
}

func (h *harness) rejectedOps() []string {
	h.t.Helper()
	return dbtest.Column[string](h.t, h.pool, "SELECT operation_id FROM idem.quarantine WHERE status = 'rejected' ORDER BY 1")
}

// y copies the selected record's id (OSC 52 through the injected clipboard).
func TestModelCopiesToTheClipboard(t *testing.T) {
	t.Parallel()
	h := setup(t)
	var copied []string
	h.m.ctx.Clipboard = func(s string) { copied = append(copied, s) }
	qid := seedConflict(t, h.pool, "acme", "charge-42", transfer100, transfer1000)
	h.init()
	h.keys("y")
	assert.Equal(t, []string{itoa(qid)}, copied)
	assert.Contains(t, h.view(), "copied the record id")
	h.keys("enter", "y")
	require.Len(t, copied, 2)
	assert.Regexp(t, `^jcs-sha256:[0-9a-f]{64}$`, copied[1])
}
