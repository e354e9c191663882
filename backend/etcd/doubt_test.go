package etcdlease

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The sequences in this file broke mutual exclusion before the ledger
// (issue 31): each ends with another owner trying to take a name whose
// holder's Deadline has not passed, and must get ErrHeld.

// pair acquires the names x (for ownerX) and y (for ownerY) on l so that
// both tenures share one etcd lease (a group, see grants): a first Acquire
// takes the lone grant, and the two wait for the next one together. When
// lose is true, the reply to x's transaction is lost after etcd applied
// it (pair checks that x's Acquire then failed as a store failure). Each
// Acquire's transaction goes out on its own. errY is y's Acquire's error.
func pair(t *testing.T, l *Locker, w *wire, x, ownerX, y, ownerY string, ttl time.Duration, lose bool) (hx, hy lease.Lease, group clientv3.LeaseID, errY error) {
	t.Helper()
	l.s.writes.batch = 1
	w.mu.Lock()
	w.gated, w.held, w.release = map[string]bool{"LeaseGrant": true}, nil, make(chan struct{})
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var first lease.Lease
	var errFirst, errX error
	wg.Go(func() { first, errFirst = l.Acquire(ctx, uniqueName("pair-first"), "first", ttl) })
	waitGrants(t, l, 1)
	// The lone grant must be sent (held back by the wire) before x and y
	// ask, or one of them may still join it.
	waitGrantSent(t, l, ttl)
	wg.Go(func() { hx, errX = l.Acquire(ctx, x, ownerX, ttl) })
	wg.Go(func() { hy, errY = l.Acquire(ctx, y, ownerY, ttl) })
	waitGrants(t, l, 3)
	if lose {
		w.dropTxnOn(l.s.key(x))
	}
	w.mu.Lock()
	w.gated = nil
	close(w.release)
	w.mu.Unlock()
	wg.Wait()
	if errFirst != nil {
		t.Fatalf("the Acquire that took the lone grant: %v", errFirst)
	}
	if err := l.Release(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	if lose != (errX != nil) || (errX != nil && (errors.Is(errX, lease.ErrHeld) || errors.Is(errX, lease.ErrLost))) {
		t.Fatalf("Acquire of %s (reply lost: %v) = %v", x, lose, errX)
	}
	group = keyLease(t, l, x)
	if group == clientv3.NoLease {
		t.Fatalf("%s has no key after its Acquire was applied", x)
	}
	if errY == nil && keyLease(t, l, y) != group {
		t.Fatalf("%s and %s are on etcd leases %x and %x; want one group", x, y, group, keyLease(t, l, y))
	}
	return hx, hy, group, errY
}

// waitGrantSent waits until no Acquire of l waits for a grant of ttl
// that is still to be sent: the grants asked for so far are under way,
// and an Acquire that asks now waits for the next one.
func waitGrantSent(t *testing.T, l *Locker, ttl time.Duration) {
	t.Helper()
	sec := ttlSeconds(ttl)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		l.s.grants.mu.Lock()
		unsent := len(l.s.grants.next[sec])
		l.s.grants.mu.Unlock()
		if unsent == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d grants of %s are still to be sent after 10s", unsent, ttl)
		}
	}
}

// TestUnansweredGroupIsNeverRevoked: two Acquires share a grant; etcd
// applies the first's transaction but its reply is lost; the other
// tenure leaves the group (its Release). The group may carry the
// unanswered tenure, so its lease must not be revoked: the first owner's
// retried Acquire re-enters that tenure and is given a Deadline, and no
// revocation queued or late may end the tenure before it.
func TestUnansweredGroupIsNeverRevoked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, w := newLocker(t)
	other := mustNew(t, newClient(t, testEndpoints, nil), WithPrefix(l.Prefix()))
	const ttl = 10 * time.Second
	x, y := uniqueName("unanswered-x"), uniqueName("unanswered-y")
	_, hy, _, errY := pair(t, l, w, x, "owner-a", y, "owner-y", ttl, true)
	if errY != nil {
		t.Fatalf("Acquire of %s: %v", y, errY)
	}
	// Revocations wait until the retry has its answer, as a slow revoker
	// queue or network would make them.
	w.stall("LeaseRevoke")
	if err := l.Release(ctx, hy); err != nil {
		t.Fatal(err)
	}
	got, err := l.Acquire(ctx, x, "owner-a", ttl)
	if err != nil {
		t.Fatalf("the retried Acquire whose first reply was lost: %v", err)
	}
	w.unstall()
	l.settle()
	if got.Deadline.Before(time.Now().Add(ttl / 2)) {
		t.Fatalf("the retried Acquire's Deadline %v is too close to test", got.Deadline)
	}
	if h, err := other.Acquire(ctx, x, "owner-b", ttl); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("another owner's Acquire of %s %v before the holder's Deadline = %v, %v; want ErrHeld", x, time.Until(got.Deadline), h, err)
	}
	if _, err := l.Renew(ctx, got, ttl); err != nil {
		t.Fatalf("the holder's Renew before its Deadline: %v", err)
	}
}

// TestForgottenGroupIsNeverRevoked: a group carries n1 and n2 of Locker
// A; n2 is released; n1 is renewed through Locker B (the group's lease
// carries only n1, so B keeps it alive), while A still counts n1 with
// the Expires it gave it. When A forgets n1 (its sweep of expired
// tenures), the group's lease must not be revoked: B's holder still
// trusts its Deadline.
func TestForgottenGroupIsNeverRevoked(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	ctx := context.Background()
	a, w := newLocker(t)
	b := mustNew(t, newClient(t, testEndpoints, nil), WithPrefix(a.Prefix()))
	c := mustNew(t, newClient(t, testEndpoints, nil), WithPrefix(a.Prefix()))
	const ttl = 2 * time.Second
	n1, n2 := uniqueName("forgotten-n1"), uniqueName("forgotten-n2")
	h1, h2, _, err := pair(t, a, w, n1, "owner", n2, "owner", ttl, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, h2); err != nil {
		t.Fatal(err)
	}
	held := h1
	for time.Now().Before(h1.Expires.Add(300 * time.Millisecond)) {
		time.Sleep(ttl / 4)
		if held, err = b.Renew(ctx, held, ttl); err != nil {
			t.Fatalf("B's Renew of %s: %v", n1, err)
		}
	}
	// A's next Acquire sweeps what it knows: n1's Expires has passed.
	forgetSoon(a)
	if _, err := a.Acquire(ctx, uniqueName("forgotten-sweep"), "owner", ttl); err != nil {
		t.Fatal(err)
	}
	a.settle()
	if h, err := c.Acquire(ctx, n1, "owner-c", ttl); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("another owner's Acquire of %s %v before the holder's Deadline = %v, %v; want ErrHeld", n1, time.Until(held.Deadline), h, err)
	}
	if _, err := b.Renew(ctx, held, ttl); err != nil {
		t.Fatalf("the holder's Renew before its Deadline: %v", err)
	}
}
