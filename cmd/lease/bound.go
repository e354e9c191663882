package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease/driver"
)

// A store that accepts connections but never answers must not hang lease:
// every call to the store is bounded, opening it included. The bound is a
// context deadline, which every backend of this module honours (lease.Run
// bounds its own calls the same way). Where the process is about to report
// the failure and exit (opening the store, the one-shot commands), lease
// also stops waiting shortly after the deadline if a call has not returned
// by then, leaving it behind, so that a client that ignores its context
// cannot hang an operator's cron job either.

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
	return driver.Redact(raw)
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
