package quarantine_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// `quarantine bulk approve 999` (no such plan) tells the second person how
// to find the plan's id, and what it tells them to type exists: each
// `idemctl ...` the error names runs (its --help at least).
func TestBulkPlanNotFoundNamesACommandThatExists(t *testing.T) {
	t.Parallel()
	fx := newCLIFixture(t)
	code, _, errOut := runQ(t, fx.DSN, "quarantine", "bulk", "approve", "999", "--yes", "--operator", "bob")
	require.Equal(t, cmdutil.ExitNotFound, code, errOut)
	assert.Contains(t, errOut, "idemctl audit list --action quarantine.bulk_accept_plan")
	for _, m := range regexp.MustCompile(`idemctl ((?:[a-z][a-z-]* ?)+)`).FindAllStringSubmatch(errOut, -1) {
		args := strings.Fields(m[1])
		if len(args) > 3 {
			args = args[:3]
		}
		c, _, e := runQ(t, fx.DSN, append(args, "--help")...)
		assert.Equal(t, cmdutil.ExitOK, c, "the error says %q, which is no command: %s", "idemctl "+strings.Join(args, " "), e)
	}
}
