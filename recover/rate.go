package recovery

import (
	"context"

	"golang.org/x/time/rate"
)

// limiter paces operations: perSecond a second, bursts of up to one second's
// worth (golang.org/x/time/rate). A nil limiter never waits.
type limiter struct{ r *rate.Limiter }

func newLimiter(perSecond float64) *limiter {
	if perSecond <= 0 {
		return nil
	}
	return &limiter{r: rate.NewLimiter(rate.Limit(perSecond), max(int(perSecond), 1))}
}

// wait takes n tokens, sleeping until they are there; false if ctx ends
// first. A request larger than the burst (a big dry-run batch) takes them a
// burst at a time, so that it waits for its share instead of being refused.
func (l *limiter) wait(ctx context.Context, n int) bool {
	if l == nil {
		return true
	}
	for n > 0 {
		k := min(n, l.r.Burst())
		if err := l.r.WaitN(ctx, k); err != nil {
			return false
		}
		n -= k
	}
	return true
}
