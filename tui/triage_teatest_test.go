package tui

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/dbtest"
	"github.com/idemctl/idemctl/tui/styles"
)

// dbScreen is a teatest program over the database services of a fresh
// database seeded with bugs, and an operator's pool to check what it wrote.
func dbScreen(t *testing.T, bugs ...dbtest.ClientBug) (*screen, *harness) {
	t.Helper()
	h := setup(t) // the pool and the database
	dbtest.SeedConflicts(t, h.dsn, bugs...)
	st := styles.Ascii()
	m := New(Options{
		Services: PoolServices(h.pool), Operator: "alice", Database: "postgres@127.0.0.1:5432/test",
		Now: func() time.Time { return time.Now() }, Styles: &st,
		Refresh: -1, StepDelay: -1, Timeout: 20 * time.Second,
	})
	return newScreen(t, m, 100, 30), h
}

// Driven through teatest with real key presses: / finds a record far below
// the newest 500, ] pages to the very last record.
func TestTeatestSearchAndPaging(t *testing.T) {
	t.Parallel()
	s, _ := dbScreen(t, dbtest.ClientBug{Prefix: "s-", Tenants: 7, N: 650, Change: "amount", Source: "mobile"})
	s.waitFor("650 records")
	s.keys("/")
	s.typ("s-00001")
	s.keys("enter")
	// One wait per frame: a wait reads what the program drew so far.
	s.waitFor("tenant-1/s-00001")
	s.keys("esc")
	s.waitFor("650 records")
	for page := 2; page <= 7; page++ {
		s.keys("]")
		s.waitFor(fmt.Sprintf("/s-%05d ", 650-100*(page-1))) // its first record
	}
	s.keys("G")
	s.waitFor("tenant-1/s-00001")
	s.keys("q")
}

// A group rejected through teatest: preview, confirmation, exactly its
// records decided.
func TestTeatestGroupReject(t *testing.T) {
	t.Parallel()
	s, h := dbScreen(t,
		dbtest.ClientBug{Prefix: "m-", Tenants: 3, N: 40, Change: "amount", Source: "mobile"},
		dbtest.ClientBug{Prefix: "w-", Tenants: 2, N: 25, Change: "currency", Source: "web"})
	s.waitFor("65 records")
	s.keys("v")
	s.waitFor("65 records in 2 groups")
	s.keys("down", "x")
	s.waitFor("Reject group")
	s.typ("web currency bug")
	s.keys("enter")
	s.waitFor("sample (5 of 25)")
	s.keys("y")
	s.waitFor("ok: rejected 25 records")
	s.keys("q")
	require.NoError(t, s.tm.Quit())
	var rejected, open int
	require.NoError(t, h.pool.QueryRow(context.Background(),
		"SELECT count(*) FILTER (WHERE status = 'rejected' AND operation_id LIKE 'w-%'), count(*) FILTER (WHERE status = 'open') FROM idem.quarantine").
		Scan(&rejected, &open))
	assert.Equal(t, 25, rejected)
	assert.Equal(t, 40, open)
}
