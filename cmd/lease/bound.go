package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/leasekit/lease"
)

// A store that accepts connections but never answers must not hang lease:
// every call to the store is bounded, opening it included. The bound is a
// context deadline, which the clients honour; and, for a client that does
// not (go-redis waits out its own read timeout unless told otherwise),
// lease stops waiting shortly after the deadline anyway and leaves the
// call behind: the process is about to report the failure and exit.

// abandonAfter is how long past its deadline a call may take to return
// its own error before lease stops waiting for it.
const abandonAfter = 50 * time.Millisecond

// storeTimeout is the cause of a context that bound calls to the store.
type storeTimeout struct {
	limit time.Duration
	by    string // the flag that set the limit
}

func (e *storeTimeout) Error() string {
	return fmt.Sprintf("gave up after %s (%s)", e.limit, e.by)
}

// bound returns ctx limited to d, whose expiry storeError reports as the
// store not answering. d <= 0 means no limit.
func (g *globals) bound(ctx context.Context, d time.Duration, by string) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, d, &storeTimeout{limit: d, by: by})
}

// storeError is err from a call to the store made with ctx (from bound):
// when ctx's limit ran out, one line saying the store did not answer in
// time, naming it without its password; else err as it is.
func (g *globals) storeError(ctx context.Context, err error) error {
	var st *storeTimeout
	if err == nil || !errors.As(context.Cause(ctx), &st) {
		return err
	}
	return failf(exitFailure, "the store %s did not answer in time: %v", g.storeName(), st)
}

// storeName is the store's URL for messages, without its password.
func (g *globals) storeName() string {
	raw, err := g.backendURL()
	if err != nil {
		return "(unknown)"
	}
	u, err := url.Parse(raw)
	if err != nil {
		// Never quote what did not parse: it may hold a password.
		return "(a URL that does not parse)"
	}
	return u.Redacted()
}

// bounded returns op's result, or ctx's cause shortly after ctx ends if op
// has not returned by then. A result that comes after that is passed to
// late, if set, so that what op opened can be closed.
func bounded[T any](ctx context.Context, op func(context.Context) (T, error), late func(T)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := op(ctx)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
	}
	t := time.NewTimer(abandonAfter)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-t.C:
	}
	if late != nil {
		go func() {
			if r := <-ch; r.err == nil {
				late(r.v)
			}
		}()
	}
	var zero T
	return zero, fmt.Errorf("the store did not answer: %w", context.Cause(ctx))
}

// boundedLocker is the Locker lease run hands to lease.Run: each call
// returns by its context's deadline (the ttl for an Acquire, the lease's
// Deadline for a Renew), even on a client that ignores it. An Acquire left
// behind is not released: its tenure expires on its own.
type boundedLocker struct{ lease.Locker }

func (b boundedLocker) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	return bounded(ctx, func(ctx context.Context) (lease.Lease, error) { return b.Locker.Acquire(ctx, name, owner, ttl) }, nil)
}

func (b boundedLocker) Renew(ctx context.Context, l lease.Lease, ttl time.Duration) (lease.Lease, error) {
	return bounded(ctx, func(ctx context.Context) (lease.Lease, error) { return b.Locker.Renew(ctx, l, ttl) }, nil)
}

func (b boundedLocker) Release(ctx context.Context, l lease.Lease) error {
	_, err := bounded(ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, b.Locker.Release(ctx, l) }, nil)
	return err
}

func (b boundedLocker) Inspect(ctx context.Context, name string) (lease.Lease, error) {
	return bounded(ctx, func(ctx context.Context) (lease.Lease, error) { return b.Locker.Inspect(ctx, name) }, nil)
}
