// Package line carries one caller's waiting for a name from lease.Run
// (or another waiting caller of this module) to the Locker's Acquire, in
// the context, so that waiting goes through Locker.Acquire itself: a
// wrapper that changes Acquire (tracing, metrics, a user's own) is never
// bypassed by waiting, and needs no method of its own to pass it on.
//
// A Locker that keeps a line of waiters (driver.Locker, over a store that
// is a driver.TurnWatcher) takes charge of a Wait at the first Acquire
// that carries it: it puts the waiter in its line for the name (the near
// end of the store's line), and from then on wakes the Wait when it is
// the waiter's turn to try. A Locker that keeps no line ignores the Wait,
// and the caller polls.
package line

import (
	"context"
	"sync"
	"time"
)

// Wait is one caller's waiting for one name.
type Wait struct {
	// Fair asks for arrival order: the name goes to the waiter first in
	// line, and a waiter whose turn has not come does not take a free
	// name (lease.WithFairWait).
	Fair bool
	// Retry is how long the caller waits at most between attempts while
	// it is not woken: what a lost wake-up can cost it.
	Retry time.Duration

	changed chan struct{}

	mu     sync.Mutex
	taken  bool
	left   bool
	onDone func(acquired bool)
}

// New returns a Wait for a caller that tries again at least every retry.
func New(fair bool, retry time.Duration) *Wait {
	return &Wait{Fair: fair, Retry: retry, changed: make(chan struct{}, 1)}
}

// Life is how long the waiter's mark in the store's line lasts after the
// attempt that placed or renewed it: three of its retries, so that a
// waiter that is alive keeps its place, and one that died holds up the
// line for at most that long.
func (w *Wait) Life() time.Duration { return 3 * w.Retry }

type key struct{}

// NewContext returns a copy of ctx that carries w to Locker.Acquire.
func NewContext(ctx context.Context, w *Wait) context.Context {
	return context.WithValue(ctx, key{}, w)
}

// FromContext returns the Wait that ctx carries, or nil.
func FromContext(ctx context.Context) *Wait {
	w, _ := ctx.Value(key{}).(*Wait)
	return w
}

// Take is for the Locker that keeps a line: it takes charge of w, and
// done is called once when the caller is done waiting (Done). It returns
// false when w was taken already or is done.
func (w *Wait) Take(done func(acquired bool)) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.taken || w.left {
		return false
	}
	w.taken, w.onDone = true, done
	return true
}

// Taken reports whether a Locker keeps w in its line: then Changed
// receives when it is w's turn to try.
func (w *Wait) Taken() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.taken
}

// Wake tells the waiter to try again; it never blocks, and wake-ups that
// come while one is pending are one.
func (w *Wait) Wake() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// Changed receives after Wake.
func (w *Wait) Changed() <-chan struct{} { return w.changed }

// Done ends the waiting: the Locker that took w takes it out of its line
// (passing the turn on when it gave up). acquired says whether the waiter
// got the name. It is safe to call more than once; only the first counts.
func (w *Wait) Done(acquired bool) {
	w.mu.Lock()
	if w.left {
		w.mu.Unlock()
		return
	}
	w.left = true
	done := w.onDone
	w.mu.Unlock()
	if done != nil {
		done(acquired)
	}
}
