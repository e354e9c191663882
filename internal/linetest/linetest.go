// Package linetest lets a test step through a Locker's waiting in the
// line of waiters, attempt by attempt, as lease.Run waits: each Acquire
// carries the waiter's place (a line.Wait) in its context.
package linetest

import (
	"context"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/line"
)

// Retry is a Waiter's retry interval unless New is given another: its
// mark in the store lasts three of these.
const Retry = 2 * time.Second

// Waiter is one caller's waiting for one name on one Locker. A Locker
// that keeps a line sets up its turn watch at the Waiter's first Acquire.
type Waiter struct {
	l    lease.Locker
	name string
	w    *line.Wait
}

// New returns a Waiter for name on l that would retry every retry (Retry
// when zero); fair asks for WithFairWait's policy.
func New(l lease.Locker, name string, fair bool, retry time.Duration) *Waiter {
	if retry <= 0 {
		retry = Retry
	}
	return &Waiter{l: l, name: name, w: line.New(fair, retry)}
}

// Acquire is one waiting attempt: Locker.Acquire with the waiter's place.
func (w *Waiter) Acquire(ctx context.Context, owner string, ttl time.Duration) (lease.Lease, error) {
	return w.l.Acquire(line.NewContext(ctx, w.w), w.name, owner, ttl)
}

// Changed receives when the Locker says it is this waiter's turn to try.
func (w *Waiter) Changed() <-chan struct{} { return w.w.Changed() }

// Taken reports whether the Locker keeps this waiter in a line.
func (w *Waiter) Taken() bool { return w.w.Taken() }

// Life is how long the waiter's mark lasts after each attempt.
func (w *Waiter) Life() time.Duration { return w.w.Life() }

// Stop ends the waiting without the name (the caller gave up): the
// Locker takes the waiter out of its line, and its mark with its last
// waiter.
func (w *Waiter) Stop() { w.w.Done(false) }

// Done ends the waiting; acquired says whether the waiter got the name.
func (w *Waiter) Done(acquired bool) { w.w.Done(acquired) }
