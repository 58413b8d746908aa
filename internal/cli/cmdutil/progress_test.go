package cmdutil

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Without a terminal, a long run logs one plain progress line per interval
// (no bar, no carriage return); with interval 0, nothing.
func TestProgressLinesWithoutATerminal(t *testing.T) {
	t.Parallel()
	ios, _, _, errOut := Test(false)
	var n atomic.Int64
	p := StartProgress(ios, "resolve", 20000, n.Load, 20*time.Millisecond)
	require.NotNil(t, p)
	n.Store(5152)
	time.Sleep(120 * time.Millisecond)
	p.Stop()
	out := errOut.String()
	assert.NotContains(t, out, "\r")
	assert.NotContains(t, out, "[")
	assert.Contains(t, out, "resolve: progress 5,152/20,000 (26%)")
	assert.GreaterOrEqual(t, strings.Count(out, "\n"), 2, out)

	assert.Nil(t, StartProgress(ios, "resolve", 1, n.Load, 0))
	var none *ProgressBar
	none.Stop()
}

func TestProgressBarRender(t *testing.T) {
	t.Parallel()
	p := newProgressBar(nil, "resolve", 200_000, nil)
	assert.Equal(t, "resolve [============            ] 100,000/200,000  50%  10,000/s  ETA 00:10", p.render(100_000, 10_000, ""))
	assert.Equal(t, "resolve [                        ] 0/200,000   0%  0/s  ETA --:--", p.render(0, 0, ""))
	assert.Equal(t, "resolve [============            ] 100,000/200,000  50%  0/s  ETA --:--  reconnecting (down 8s, retrying until 20s)",
		p.render(100_000, 0, "reconnecting (down 8s, retrying until 20s)"))
	assert.Equal(t, "resolve: progress 100,000/200,000 (50%), 0/s, elapsed 00:30, reconnecting (down 8s, retrying until 20s)",
		p.renderLine(100_000, 30*time.Second, 0, "reconnecting (down 8s, retrying until 20s)"))
	unknown := newProgressBar(nil, "resolve", 0, nil)
	assert.Equal(t, "resolve 1,234,567  123,456/s", unknown.render(1_234_567, 123_456, ""))
	assert.Equal(t, "1:01:01", formatClock(time.Hour+time.Minute+time.Second))
}
