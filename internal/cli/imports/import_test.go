package imports

import (
	"testing"

	"github.com/idemctl/idemctl/internal/cli/clitest"

	"github.com/stretchr/testify/assert"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
)

// import plan's flags become options; a wrong combination is a usage
// error before anything is read.
func TestImportPlanOptions(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := cmdutil.Test(false)
	var got *ImportPlanOptions
	capture := func(o *ImportPlanOptions) error { got = o; return nil }
	base := []string{"--class", "rides.charge", "--ambiguous", "a.ndjson", "--reason", "MIG-1"}
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"ndjson", append([]string{"--from-ndjson", "k.ndjson"}, base...), cmdutil.ExitOK},
		{"postgres", append([]string{"--from-postgres", "postgres://r@db/x", "--query", "SELECT 1", "--password-env", "IDEMCTL_SOURCE_X"}, base...), cmdutil.ExitOK},
		{"no source", base, cmdutil.ExitUsage},
		{"two sources", append([]string{"--from-ndjson", "k", "--from-postgres", "postgres://r@db/x", "--query", "q"}, base...), cmdutil.ExitUsage},
		{"postgres without query", append([]string{"--from-postgres", "postgres://r@db/x"}, base...), cmdutil.ExitUsage},
		{"query with a file", append([]string{"--from-ndjson", "k", "--query", "q"}, base...), cmdutil.ExitUsage},
		{"no ambiguous list", []string{"--from-ndjson", "k", "--class", "c", "--reason", "r"}, cmdutil.ExitUsage},
		{"bad hash function", append([]string{"--from-ndjson", "k", "--hash-function", "md5"}, base...), cmdutil.ExitUsage},
		{"bad cursor", append([]string{"--from-ndjson", "k", "--since", "yesterday"}, base...), cmdutil.ExitUsage},
		{"cursor", append([]string{"--from-ndjson", "k", "--since", "2026-11-30T23:59:58.123456Z/42/key-9001"}, base...), cmdutil.ExitOK},
	}
	for _, c := range cases {
		got = nil
		code := clitest.ExecSub(t, NewCmdImportPlan(cmdutil.NewFactory(ios), capture), c.args...)
		assert.Equal(t, c.code, code, c.name)
		assert.Equal(t, c.code == cmdutil.ExitOK, got != nil, c.name)
	}
}
