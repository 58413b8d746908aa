package resolve

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemctl/idemctl/internal/cli/cmdutil"
	"github.com/idemctl/idemctl/recovery"
)

// One operation is "1 operation", not "1 operations".
func TestSummaryLineCounts(t *testing.T) {
	t.Parallel()
	one := summaryLine(recovery.RunSummary{Counts: recovery.Counts{recovery.AlreadyApplied: 1}})
	assert.True(t, strings.HasPrefix(one, "1 operation: 1 already_applied"), one)
	many := summaryLine(recovery.RunSummary{Counts: recovery.Counts{recovery.AlreadyApplied: 1, recovery.Applied: 1203}})
	assert.True(t, strings.HasPrefix(many, "1,204 operations:"), many)
}

// The progress total does not count blank lines (the run itself:
// TestResolveSummaryAndProgressTotal in internal/cli).
func TestDigestFileSkipsBlankLines(t *testing.T) {
	t.Parallel()
	var in strings.Builder
	for i := range cmdutil.MaxAttentionRows + 3 {
		fmt.Fprintf(&in, `{"tenant":"shop","operation_id":"bad-%d","class":"demo.transfer","payload":{"from":"a","to":"a","amount":1,"currency":"EUR"}}`+"\n\n  \n", i)
	}
	file := filepath.Join(t.TempDir(), "batch.ndjson")
	require.NoError(t, os.WriteFile(file, []byte(in.String()), 0o600))
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	lines, _, err := digestFile(f)
	require.NoError(t, err)
	assert.Equal(t, int64(cmdutil.MaxAttentionRows+3), lines, "blank lines are not counted")
}
