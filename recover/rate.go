package recovery

import (
	"context"
	"sync"
	"time"
)

// limiter is a token bucket: perSecond tokens a second, bursts of up to one
// second's worth. A nil limiter never waits.
type limiter struct {
	mu        sync.Mutex
	perSecond float64
	burst     float64
	tokens    float64
	last      time.Time
}

func newLimiter(perSecond float64) *limiter {
	if perSecond <= 0 {
		return nil
	}
	burst := max(perSecond, 1)
	return &limiter{perSecond: perSecond, burst: burst, tokens: burst, last: time.Now()}
}

// wait takes n tokens, sleeping until they are there; false if ctx ends first.
// A request larger than the burst is allowed to take the bucket below zero, so
// a big dry-run batch waits for its share instead of forever.
func (l *limiter) wait(ctx context.Context, n int) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	now := time.Now()
	l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.perSecond)
	l.last = now
	l.tokens -= float64(n)
	var delay time.Duration
	if l.tokens < 0 {
		delay = time.Duration(-l.tokens / l.perSecond * float64(time.Second))
	}
	l.mu.Unlock()
	if delay == 0 {
		return true
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
