package resolve

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A dry run's collector setting is undone when the run ends, and left out
// when GOGC is set in the environment.
func TestCollectForDryRun(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	before, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	defer debug.SetGCPercent(before)
	restore := collectForDryRun()
	assert.Equal(t, 400, debug.SetGCPercent(400))
	assert.Equal(t, int64(dryRunHeapLimit), debug.SetMemoryLimit(-1))
	restore()
	assert.Equal(t, 100, debug.SetGCPercent(100))
	assert.Equal(t, limit, debug.SetMemoryLimit(-1))

	t.Setenv("GOGC", "100")
	collectForDryRun()()
	assert.Equal(t, 100, debug.SetGCPercent(100), "GOGC from the environment stands")
}
