package view

import (
	"context"
	"fmt"

	tea "github.com/charmbracelet/bubbletea"
)

// Loader is the loading state of a list view: the number of its latest load
// (an older answer is dropped), whether a load is on its way, whether one
// has arrived, and the banner of the last failed load, which a later load
// that succeeds clears unless another message has replaced it.
type Loader[T any] struct {
	c       *Context
	seq     int
	failed  Banner
	Loading bool
	Loaded  bool
}

// NewLoader returns a Loader whose loads run under c's command context.
func NewLoader[T any](c *Context) Loader[T] { return Loader[T]{c: c} }

// Loaded is the answer to one load of one Loader.
type Loaded[T any] struct {
	from  *Loader[T]
	seq   int
	value T
	err   error
}

// Load starts a load: fetch runs inside the returned tea.Cmd, bounded by the
// per-command timeout, and its answer comes back as a Loaded[T]. An error
// says what failed: "what: err" (err alone when what is empty).
func (l *Loader[T]) Load(what string, fetch func(ctx context.Context) (T, error)) tea.Cmd {
	l.seq++
	l.Loading = true
	seq, c := l.seq, l.c
	return func() tea.Msg {
		ctx, cancel := c.CmdContext()
		defer cancel()
		v, err := fetch(ctx)
		if err != nil && what != "" {
			err = fmt.Errorf("%s: %w", what, err)
		}
		return Loaded[T]{from: l, seq: seq, value: v, err: err}
	}
}

// Arrived takes msg when it answers this loader's latest load: a failure
// becomes *ban (an error banner); a success clears *ban when it still shows
// the last failure. ok is true when msg carried a value to show.
func (l *Loader[T]) Arrived(msg Loaded[T], ban *Banner) (value T, ok bool) {
	if msg.from != l || msg.seq != l.seq {
		return value, false
	}
	l.Loading = false
	if msg.err != nil {
		*ban = ErrorBanner(msg.err)
		l.failed = *ban
		return value, false
	}
	if *ban == l.failed {
		// The load that failed has succeeded since: its error is stale.
		*ban = Banner{}
	}
	l.failed = Banner{}
	l.Loaded = true
	return msg.value, true
}

// At is &items[i], or nil when i is past the end (an empty list).
func At[T any](items []T, i int) *T {
	if i < len(items) {
		return &items[i]
	}
	return nil
}

// Reselect puts the cursor of l back on the row it was on, found by key,
// after the rows changed from old to rows, and keeps it within the h rows
// shown: a reload does not move the operator's selection.
func Reselect[T any, K comparable](l *ListNav, old, rows []T, key func(T) K, h int) {
	var sel K
	if p := At(old, l.Cursor); p != nil {
		sel = key(*p)
	}
	for i, r := range rows {
		if key(r) == sel {
			l.Cursor = i
			break
		}
	}
	l.Clamp(len(rows), h)
}
