package quarantine_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// rv finding: `quarantine bulk approve 999` (no such plan) says "idemctl
// quarantine bulk list shows the plans" (the hint of IX120,
// migrations/code/064_quarantine_bulk_accept_lock.sql), but there is no
// `quarantine bulk list`: it exits 2, unknown command. The second person
// told to find the plan's id that way cannot; what an error tells the
// operator to type next must exist.
func TestRVBulkErrorNamesACommandThatExists(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	code, _, errOut := runQ(t, fx.DSN, "quarantine", "bulk", "approve", "999", "--yes", "--operator", "bob")
	require.Equal(t, cmdutil.ExitNotFound, code, errOut)
	for _, m := range regexp.MustCompile(`idemctl ((?:[a-z-]+ ?)+)`).FindAllStringSubmatch(errOut, -1) {
		args := strings.Fields(m[1])
		if len(args) > 3 {
			args = args[:3]
		}
		c, _, e := runQ(t, fx.DSN, append(args, "--help")...)
		assert.Equal(t, cmdutil.ExitOK, c, "the error says %q, which is no command: %s", "idemctl "+strings.Join(args, " "), e)
	}
}
