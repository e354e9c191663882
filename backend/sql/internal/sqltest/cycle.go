package sqltest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/line"
)

// CycleThroughURL opens a Locker with lease.Open(ctx, u) and takes one
// tenure of name for owner through Acquire, Renew, Inspect and Release
// (with, in between, a busy Acquire that waits in line, where the store
// keeps a line),
// failing t, with u in the message, on the first error or when Inspect
// does not show the tenure. It closes the Locker.
func CycleThroughURL(ctx context.Context, t testing.TB, u, name, owner string) {
	t.Helper()
	l, err := lease.Open(ctx, u)
	if err != nil {
		t.Fatalf("lease.Open(%s): %v", u, err)
	}
	defer l.Close()
	held, err := l.Acquire(ctx, name, owner, time.Minute)
	if err == nil {
		// A waiter's statements too: a busy Acquire that waits in line
		// (a turn watch and a mark, where the store keeps a line), whose
		// end takes the mark away.
		w := line.New(false, time.Second)
		if _, err = l.Acquire(line.NewContext(ctx, w), name, owner+"-waiter", time.Minute); errors.Is(err, lease.ErrHeld) {
			err = nil
		} else if err == nil {
			err = errors.New("a waiting Acquire of a held name succeeded")
		}
		w.Done(false)
	}
	if err == nil {
		held, err = l.Renew(ctx, held, 2*time.Minute)
	}
	if err == nil {
		var got lease.Lease
		if got, err = l.Inspect(ctx, name); err == nil && (got.Token != held.Token || got.Owner != held.Owner) {
			t.Errorf("through %s: Inspect = %v, want %v", u, got, held)
		}
	}
	if err == nil {
		err = l.Release(ctx, held)
	}
	if err != nil {
		t.Fatalf("through %s: Acquire, Renew, Inspect, Release: %v", u, err)
	}
}
