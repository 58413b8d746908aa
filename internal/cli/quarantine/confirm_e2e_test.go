package quarantine_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// reject is final: without a terminal it needs --yes; on one it shows the
// record and asks, and only "y" decides.
func TestRejectAsksFirst(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	q := fx.Conflict(t, "acme", "ask-1", 1, 2)
	code, out, errOut := runQ(t, fx.DSN, "quarantine", "reject", fmt.Sprint(q), "--reason", "x")
	assert.Equal(t, cmdutil.ExitUsage, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "--yes (-y)")
	assert.Equal(t, 1, fx.Count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'open'"))

	for _, answer := range []string{"n\n", "y\n"} {
		code, _, errOut := runTTY(t, fx.DSN, answer, "quarantine", "reject", fmt.Sprint(q), "--reason", "tampered")
		assert.Contains(t, errOut, fmt.Sprintf("Reject record %d (acme/ask-1", q))
		if answer == "n\n" {
			assert.Equal(t, cmdutil.ExitFailure, code)
			assert.Equal(t, 1, fx.Count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'open'"), "declined: nothing done")
		} else {
			assert.Equal(t, cmdutil.ExitOK, code, errOut)
			assert.Equal(t, 1, fx.Count(t, "SELECT count(*) FROM idem.quarantine WHERE status = 'rejected'"))
		}
	}
	code, _, _ = runQ(t, fx.DSN, "quarantine", "reject", fmt.Sprint(q), "-y", "--reason", "again")
	assert.Equal(t, cmdutil.ExitInvalid, code, "-y is --yes; an already decided record is refused")
	// On a terminal, a decided record is refused before the question.
	for verb, extra := range map[string][]string{"reject": nil, "accept-as-new": {"--new-operation-id", "ask-1-rev2"}} {
		code, _, errOut = runTTY(t, fx.DSN, "y\n", append([]string{"quarantine", verb, fmt.Sprint(q), "--reason", "again"}, extra...)...)
		assert.Equal(t, cmdutil.ExitInvalid, code, verb)
		assert.Contains(t, errOut, "is already rejected", verb)
		assert.NotContains(t, errOut, "?", "%s asked first: %s", verb, errOut)
	}
}
