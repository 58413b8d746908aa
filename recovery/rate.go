package recovery

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// pacer spaces operations (executor calls and requests to a class's
// service, Config.MaxRate) evenly: each starts at least 1/perSecond after
// the one before, whichever worker sends it, so that no one-second window,
// sliding, holds more than perSecond of them. There is no burst by design:
// an operation that waited for its turn does not let the next one go early.
// What timing adds (a worker scheduled late, then the next on time) is at
// most a tenth of the rate, rounded down (the documented burst). A nil
// pacer never waits.
type pacer struct {
	gap  time.Duration
	turn chan struct{} // holds the right to send next
	last time.Time
}

func newPacer(perSecond float64) *pacer {
	if perSecond <= 0 {
		return nil
	}
	p := &pacer{gap: time.Duration(float64(time.Second) / perSecond), turn: make(chan struct{}, 1)}
	p.turn <- struct{}{}
	return p
}

// wait blocks until one more operation may start; false if stop closes first
// (a nil stop never does).
func (p *pacer) wait(stop <-chan struct{}) bool {
	if p == nil {
		return true
	}
	select {
	case <-p.turn:
	case <-stop:
		return false
	}
	defer func() { p.turn <- struct{}{} }()
	if !p.last.IsZero() {
		if d := time.Until(p.last.Add(p.gap)); d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-stop:
				return false
			}
		}
	}
	p.last = time.Now()
	return true
}

// limiter paces lookups (Config.MaxLookupRate), which send no operation:
// perSecond identities a second, in bursts of up to one second's worth
// (golang.org/x/time/rate). A nil limiter never waits.
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

// paceBatch is a dry run's batch size under a lookup rate: a batch waits for
// the tokens of all its identities before it is looked up, so a batch of
// 5,000 at 100 a second answered nothing for 50 s, then everything at once,
// and the progress line read 0 until then. Capped at a quarter of a second's
// worth, answers (and progress) come at the rate, four times a second.
func paceBatch(batch int, lookupRate, opRate float64) int {
	perSecond := lookupRate
	if perSecond <= 0 {
		perSecond = opRate // a dry run's lookups follow --max-rate when no lookup rate is given
	}
	if perSecond <= 0 {
		return batch
	}
	return max(1, min(batch, int(perSecond/4)))
}
