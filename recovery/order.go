package recovery

import (
	"context"
	"sync"
	"sync/atomic"
)

// window hands out positions to dispatched items and emits their results in
// input order. At most size items are between dispatch and emission, which
// bounds memory whatever the input length: a slow operation holds the window
// back instead of letting results pile up behind it.
//
// Every answer is counted (answer), in input order, whether or not it could
// be written: after emit's first error nothing more is emitted, onEmitErr is
// called once (the run stops reading), and the answers of what was in flight
// are still counted.
type window struct {
	slots chan struct{}

	mu        sync.Mutex
	ring      []Result
	filled    []bool
	next      int // next position to emit
	answer    func(*Result)
	emit      func(Result) error
	onEmitErr func(error)
	emitErr   error
	skipped   int // dispatched, never answered
	// settled, when set, counts answers as they come, in any order (the
	// progress a run shows), before they are emitted in input order.
	settled *atomic.Int64
}

func newWindow(size int, answer func(*Result), emit func(Result) error, onEmitErr func(error)) *window {
	return &window{
		slots:     make(chan struct{}, size),
		ring:      make([]Result, size),
		filled:    make([]bool, size),
		answer:    answer,
		emit:      emit,
		onEmitErr: onEmitErr,
	}
}

// acquire waits for room for one more item; false when ctx is done first.
func (w *window) acquire(ctx context.Context) bool {
	select {
	case w.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// done records the result of the item at position pos and emits every result
// that is now next in order. Skipped results free their slot without being
// counted or emitted.
func (w *window) done(pos int, r Result) {
	if w.settled != nil && !r.skipped {
		w.settled.Add(1)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	i := pos % len(w.ring)
	w.ring[i], w.filled[i] = r, true
	for {
		j := w.next % len(w.ring)
		if !w.filled[j] {
			return
		}
		res := w.ring[j]
		w.ring[j], w.filled[j] = Result{}, false
		w.next++
		if res.skipped {
			w.skipped++
		} else {
			w.answer(&res)
			if w.emitErr == nil {
				if err := w.emit(res); err != nil {
					w.emitErr = err
					w.onEmitErr(err)
				}
			}
		}
		<-w.slots
	}
}

// err is the first error returned by emit.
func (w *window) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.emitErr
}

// unanswered is how many operations were dispatched and never answered.
func (w *window) unanswered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.skipped
}
