package inspect_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/clitest"
	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// --history tells one identity's story in time order, each step with the
// audit row that records it.
func TestInspectHistory(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	q := fx.Conflict(t, "acme", "story-1", 100, 1000)
	code, _, errOut := runQ(t, fx.DSN, "quarantine", "reject", fmt.Sprint(q), "--yes", "--reason", "the retry changed the amount", "--operator", "alice")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	code, _, errOut = runQ(t, fx.DSN, "corrections", "add", "--tenant", "acme", "--op", "story-1", "--reason", "refund REF-9 pending", "--operator", "carol")
	require.Equal(t, cmdutil.ExitOK, code, errOut)

	code, out, errOut := runQ(t, fx.DSN, "inspect", "--tenant", "acme", "--op", "story-1", "--history", "-o", "json")
	require.Equal(t, cmdutil.ExitOK, code, errOut)
	events := jsonLines(t, out)
	var kinds []string
	for _, e := range events {
		kinds = append(kinds, e["event"].(string))
	}
	assert.Equal(t, []string{"applied", "conflict", "decision", "correction"}, kinds)
	assert.Contains(t, events[0]["detail"], "class demo.transfer, hash jcs-sha256:")
	assert.Contains(t, events[1]["detail"], fmt.Sprintf("quarantine id %d", q))
	assert.Contains(t, events[2]["detail"], "rejected by alice")
	assert.NotNil(t, events[2]["audit_id"], "a decision has its audit row")
	assert.NotNil(t, events[3]["audit_id"], "a correction has its audit row")
	assert.Nil(t, events[0]["audit_id"])

	code, out, _ = runQ(t, fx.DSN, "inspect", "--tenant", "acme", "--op", "story-1", "--history", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, "refund REF-9 pending")
	// At 80 columns every event keeps its time, and a hash stands whole on
	// a line of its own: cut in two, it could not be copied.
	code, out, _ = clitest.RunTTY(t, fx.DSN, "", "inspect", "--tenant", "acme", "--op", "story-1", "--history")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Equal(t, len(events), strings.Count(out, "\nat: ")+boolInt(strings.HasPrefix(out, "at: ")), out)
	assert.Regexp(t, `(?m)^jcs-sha256:[0-9a-f]{64},?$`, out)
	for _, l := range strings.Split(out, "\n") {
		assert.LessOrEqual(t, ansi.StringWidth(l), 80, "%q", l)
	}

	// The record itself labels quarantine ids as ids.
	code, out, _ = runQ(t, fx.DSN, "inspect", "--tenant", "acme", "--op", "story-1", "-o", "table")
	require.Equal(t, cmdutil.ExitOK, code)
	assert.Contains(t, out, fmt.Sprintf("#%d", q))

	code, _, errOut = runQ(t, fx.DSN, "inspect", "--tenant", "acme", "--op", "never", "--history")
	assert.Equal(t, cmdutil.ExitNotFound, code)
	assert.Contains(t, errOut, "knows nothing of")
}
