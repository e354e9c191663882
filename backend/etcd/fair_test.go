package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/fairtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// lineLength is how many places name's line under l's prefix holds.
func lineLength(t testing.TB, c *clientv3.Client, l *Locker, name string) int64 {
	t.Helper()
	r, err := c.Get(t.Context(), l.s.linePrefix(name), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return r.Count
}

// TestRunFairWaitAcrossLockers: ten waiters, each with a client and Locker
// of its own (as ten processes would have), queue for a held name with
// WithFairWait and get it in the order they arrived.
func TestRunFairWaitAcrossLockers(t *testing.T) {
	ctx := t.Context()
	admin := newClient(t, testEndpoints, nil)
	holder := mustNew(t, admin, WithPrefix(randomPrefix()))
	name := uniqueName("fair")
	held, err := holder.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	newLocker := func(int) lease.Locker {
		return mustNew(t, newClient(t, testEndpoints, nil), WithPrefix(holder.Prefix()))
	}
	fairtest.ArrivalOrder(t, holder, held, 10, newLocker, 20*time.Millisecond, func(i int) {
		// Each is in line before the next starts.
		deadline := time.Now().Add(10 * time.Second)
		for lineLength(t, admin, holder, name) < int64(i+1) {
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d did not join the line within 10s", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	if n := lineLength(t, admin, holder, name); n != 0 {
		t.Errorf("%d places left in line after every waiter ran", n)
	}
}

// TestQueuedTurnIsOneRoundTrip: a waiter whose turn has come acquires
// with one round trip: one transaction, with the keep-alives of the
// tenure's pooled lease and of the place alongside.
func TestQueuedTurnIsOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	l, w := newLocker(t)
	warm(t, l, time.Minute, 3*time.Second)
	name := uniqueName("fair-rtt")
	held, err := l.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AcquireQueued(ctx, name, "waiter", time.Minute, 3*time.Second); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("AcquireQueued of a held name = %v, want ErrHeld", err)
	}
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	l.settle()
	w.take()
	var got lease.Lease
	err = w.waves(t, func() (err error) {
		got, err = l.AcquireQueued(ctx, name, "waiter", time.Minute, 3*time.Second)
		return err
	}, []string{"KeepAlive", "KeepAlive", "Txn"})
	if err != nil {
		t.Fatalf("AcquireQueued at the waiter's turn: %v", err)
	}
	if got.Owner != "waiter" || got.Token <= held.Token {
		t.Fatalf("AcquireQueued at the waiter's turn = %v; want a tenure of waiter with a token above %d", got, held.Token)
	}
	l.settle()
	calls, _ := w.take()
	t.Logf("the turn sent %s", calls)
	if n := lineLength(t, l.s.client, l, name); n != 0 {
		t.Errorf("the waiter's place is still in line after its turn (%d places)", n)
	}
}

// TestListLeavesOutPlaces: the places in a name's line are keys under the
// Locker's prefix, but never tenures: List does not show them.
func TestListLeavesOutPlaces(t *testing.T) {
	ctx := t.Context()
	l, _ := newLocker(t)
	name := uniqueName("fair-list")
	if _, err := l.Acquire(ctx, name, "holder", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AcquireQueued(ctx, name, "waiter", time.Minute, 3*time.Second); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("AcquireQueued of a held name = %v, want ErrHeld", err)
	}
	if n := lineLength(t, l.s.client, l, name); n != 1 {
		t.Fatalf("the line holds %d places, want 1", n)
	}
	all, err := l.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].Name != name || all[0].Owner != "holder" {
		t.Fatalf("List = %v; want only the holder's tenure of %q", all, name)
	}
	if err := l.Dequeue(ctx, name, "waiter"); err != nil {
		t.Fatal(err)
	}
	if n := lineLength(t, l.s.client, l, name); n != 0 {
		t.Fatalf("the line holds %d places after Dequeue, want 0", n)
	}
}

// TestFairWaitersUnderContention: five Lockers, each with its own client,
// run lease.Run with WithFairWait on one name again and again. No two
// hold it at once, every run gets its turn, and the line is empty at the
// end: a place left behind by a waiter's turn would hold up the others.
func TestFairWaitersUnderContention(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	admin := newClient(t, testEndpoints, nil)
	prefix := randomPrefix()
	ref := mustNew(t, admin, WithPrefix(prefix))
	name := uniqueName("fair-contention")
	const lockers, runs = 5, 6
	var holders, maxHolders, done atomic.Int64
	var wg sync.WaitGroup
	for i := range lockers {
		l := mustNew(t, newClient(t, testEndpoints, nil), WithPrefix(prefix))
		owner := fmt.Sprintf("worker-%d", i)
		wg.Go(func() {
			for range runs {
				err := lease.Run(ctx, l, name, 5*time.Second, func(context.Context) error {
					n := holders.Add(1)
					for {
						m := maxHolders.Load()
						if n <= m || maxHolders.CompareAndSwap(m, n) {
							break
						}
					}
					time.Sleep(3 * time.Millisecond)
					holders.Add(-1)
					return nil
				}, lease.WithOwner(owner), lease.WithFairWait(60*time.Second))
				if err != nil {
					t.Errorf("%s: %v", owner, err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if m := maxHolders.Load(); m != 1 {
		t.Fatalf("%d holders at once", m)
	}
	if n := done.Load(); n != lockers*runs {
		t.Fatalf("%d of %d runs got their turn", n, lockers*runs)
	}
	if n := lineLength(t, admin, ref, name); n != 0 {
		t.Fatalf("%d places left in line after every run", n)
	}
}
