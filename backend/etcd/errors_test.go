package etcdlease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// calls runs each method of a Locker once, on a name nobody holds.
var calls = []struct {
	op   string
	call func(ctx context.Context, l *Locker) error
}{
	{"Acquire", func(ctx context.Context, l *Locker) error {
		_, err := l.Acquire(ctx, "n", "o", time.Second)
		return err
	}},
	{"Renew", func(ctx context.Context, l *Locker) error {
		_, err := l.Renew(ctx, lease.Lease{Name: "n", Owner: "o", Token: 7}, time.Second)
		return err
	}},
	{"Release", func(ctx context.Context, l *Locker) error {
		return l.Release(ctx, lease.Lease{Name: "n", Owner: "o", Token: 7})
	}},
	{"Inspect", func(ctx context.Context, l *Locker) error {
		_, err := l.Inspect(ctx, "n")
		return err
	}},
	{"List", func(ctx context.Context, l *Locker) error {
		_, err := l.List(ctx, "")
		return err
	}},
	{"ForceRelease", func(ctx context.Context, l *Locker) error {
		_, err := l.ForceRelease(ctx, "n")
		return err
	}},
}

// mustBeFailure fails t unless err wraps want and no lease sentinel: a
// store or context failure must never pass for a lease outcome.
func mustBeFailure(t *testing.T, what string, err error, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded; want an error", what)
	}
	for _, s := range []error{lease.ErrHeld, lease.ErrLost, lease.ErrNotHeld, lease.ErrInvalid, lease.ErrClosed} {
		if errors.Is(err, s) {
			t.Fatalf("%s: a failure was reported as %q: %v", what, s, err)
		}
	}
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v; want an error wrapping %v", what, err, want)
	}
}

// TestNoLeaderIsAnError: when etcd answers a transaction with "no leader"
// (a cluster that lost its quorum), Acquire, Renew and Release return
// that error wrapped, never a lease outcome. (The client retries reads and
// lease grants that meet "no leader" by itself, until their context ends.)
func TestNoLeaderIsAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, w := newLocker(t)
	name := uniqueName("no-leader")
	held, err := l.Acquire(ctx, name, "owner-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w.failNext("Txn", rpctypes.ErrGRPCNoLeader)
	_, err = l.Acquire(ctx, name, "owner-b", time.Minute)
	mustBeFailure(t, "Acquire without a leader", err, rpctypes.ErrNoLeader)
	w.failNext("Txn", rpctypes.ErrGRPCNoLeader)
	_, err = l.Renew(ctx, held, time.Minute)
	mustBeFailure(t, "Renew without a leader", err, rpctypes.ErrNoLeader)
	w.failNext("Txn", rpctypes.ErrGRPCNoLeader)
	mustBeFailure(t, "Release without a leader", l.Release(ctx, held), rpctypes.ErrNoLeader)
	if err := l.Release(ctx, held); err != nil {
		t.Fatalf("Release once the leader is back: %v", err)
	}
}

// TestContextErrorsAreReportedAsSuch: on a live cluster, a canceled
// context and one whose deadline has passed are returned wrapped.
func TestContextErrorsAreReportedAsSuch(t *testing.T) {
	t.Parallel()
	l, _ := newLocker(t)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range calls {
		mustBeFailure(t, c.op+" with a canceled context", c.call(canceled, l), context.Canceled)
		mustBeFailure(t, c.op+" with an expired context", c.call(expired, l), context.DeadlineExceeded)
	}
}

// TestCloseLeavesTheCallersClientOpen: a Locker from New refuses calls
// after Close but never closes the client it was given; one from Open
// closes its own.
func TestCloseLeavesTheCallersClientOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := newClient(t, testEndpoints, nil)
	l := mustNew(t, client, WithPrefix(randomPrefix()))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, c := range calls {
		if err := c.call(ctx, l); !errors.Is(err, lease.ErrClosed) {
			t.Fatalf("%s after Close = %v; want ErrClosed", c.op, err)
		}
	}
	if _, err := client.Get(ctx, "any"); err != nil {
		t.Fatalf("the caller's client stopped working after the Locker's Close: %v", err)
	}

	owned, err := Open(ctx, "etcd://"+testEndpoints[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owned.Inspect(ctx, "n"); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Inspect on an opened Locker: %v", err)
	}
	if err := owned.Close(); err != nil {
		t.Fatal(err)
	}
	if owned.s.client.Ctx().Err() == nil {
		t.Fatal("the client Open made is still open after Close")
	}
}
