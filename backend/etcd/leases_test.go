package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/etcdtest"
	"github.com/leasekit/lease/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// leasesOf returns the etcd leases that exist on l's cluster once the
// background work l's calls started is done.
func leasesOf(t testing.TB, l *Locker) []clientv3.LeaseStatus {
	t.Helper()
	l.settle()
	r, err := l.s.client.Leases(context.Background())
	if err != nil {
		t.Fatalf("list etcd leases: %v", err)
	}
	return r.Leases
}

// wantLeases fails t unless l's cluster has exactly n etcd leases besides
// the spare ones in l's pool.
func wantLeases(t testing.TB, l *Locker, n int, after string) {
	t.Helper()
	got := len(leasesOf(t, l))
	if spares := l.spares(); got != n+spares {
		t.Fatalf("after %s: %d etcd leases exist, %d of them spares in the pool; want %d besides the spares", after, got, spares, n)
	}
}

// privateServer starts an embedded etcd server of its own, always (even
// with LEASE_TEST_ETCD set), so that a test can count the cluster's etcd
// leases or watch its raft index without other tests' traffic.
func privateServer(t testing.TB) []string {
	t.Helper()
	srv, err := etcdtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv.Endpoints()
}

// privateLocker returns a Locker on a private embedded server.
func privateLocker(t testing.TB) (*Locker, *wire) {
	t.Helper()
	w := newWire()
	return mustNew(t, newClient(t, privateServer(t), w)), w
}

// TestNoEtcdLeaseOutlivesItsTenure counts the cluster's etcd leases
// around every operation: each live tenure has exactly one, the others
// are spares in the Locker's pool, and none is left when the Locker has
// closed.
func TestNoEtcdLeaseOutlivesItsTenure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _ := privateLocker(t)
	want := func(n int, after string) {
		t.Helper()
		wantLeases(t, l, n, after)
	}
	want(0, "start")

	a, err := l.Acquire(ctx, "a", "owner-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want(1, "Acquire")
	if again, err := l.Acquire(ctx, "a", "owner-a", 2*time.Minute); err != nil || again.Token != a.Token {
		t.Fatalf("re-entrant Acquire = %v, %v; want token %d", again, err, a.Token)
	}
	want(1, "re-entrant Acquire")
	if a, err = l.Renew(ctx, a, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	want(1, "Renew with the same ttl")
	if a, err = l.Renew(ctx, a, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	want(1, "Renew with another ttl")
	if _, err := l.Acquire(ctx, "a", "owner-b", time.Minute); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("Acquire by another owner = %v; want ErrHeld", err)
	}
	want(1, "a refused Acquire")
	forged := a
	forged.Token++
	if _, err := l.Renew(ctx, forged, time.Minute); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew with a wrong token = %v; want ErrLost", err)
	}
	want(1, "a refused Renew")
	if _, err := l.Renew(ctx, forged, 3*time.Minute); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew to another ttl with a wrong token = %v; want ErrLost", err)
	}
	want(1, "a refused Renew to another ttl")
	if err := l.Release(ctx, forged); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Release with a wrong token = %v; want ErrLost", err)
	}
	want(1, "a refused Release")
	if err := l.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	want(0, "Release")

	for i := range 20 { // enough for the pool to fill
		b, err := l.Acquire(ctx, "b", "owner-b", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := l.Release(ctx, b); err != nil {
				t.Fatal(err)
			}
			continue
		}
		ended, err := l.ForceRelease(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		if ended.Token != b.Token || ended.Owner != "owner-b" {
			t.Fatalf("ForceRelease returned %v; want the tenure %v", ended, b)
		}
	}
	want(0, "cycles of Acquire and Release or ForceRelease")
	if l.spares() == 0 {
		t.Fatal("after 20 Acquires in a row, the pool has no spare etcd lease")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, []string{l.s.client.Endpoints()[0]}, nil)
	if r, err := c.Leases(ctx); err != nil || len(r.Leases) != 0 {
		t.Fatalf("after Close, the cluster has etcd leases %v (%v); want none", r, err)
	}
}

// warm makes l's keep-alive stream open and its pool hold spare leases
// for tenures of each ttl, as they are in a program that has been
// acquiring for a while.
func warm(t testing.TB, l *Locker, ttls ...time.Duration) {
	t.Helper()
	ctx := context.Background()
	if err := l.openStreams(); err != nil {
		t.Fatal(err)
	}
	for _, ttl := range ttls {
		for range 3 {
			held, err := l.Acquire(ctx, uniqueName("warm"), "warm", ttl)
			if err != nil {
				t.Fatal(err)
			}
			if held, err = l.Renew(ctx, held, ttl); err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx, held); err != nil {
				t.Fatal(err)
			}
		}
	}
	l.settle()
}

// TestRoundTrips counts the requests each operation sends, and the round
// trips it waits for (its requests are held back, wave by wave, to see
// which go out before any is answered), and holds them to the table in
// the package documentation. Run with -v to see them. Requests counted
// but in no wave run in the background (a pool refill, a revocation).
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, w := newLocker(t)
	ow := newWire()
	other := mustNew(t, newClient(t, testEndpoints, ow), WithPrefix(l.Prefix()))
	warm(t, l, time.Minute, 2*time.Minute)
	warm(t, other, time.Minute)
	w.take()
	ow.take()
	name := uniqueName("round-trips")

	step := func(op string, on *wire, want string, waves [][]string, f func() error) {
		t.Helper()
		if err := on.waves(t, f, waves...); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		l.settle()
		other.settle()
		calls, n := on.take()
		t.Logf("%-46s %d round trip(s), %d requests: %s", op, len(waves), n, calls)
		if calls != want {
			t.Errorf("%s sent %s; want %s", op, calls, want)
		}
	}
	wave := func(methods ...string) []string { return methods }

	var a lease.Lease
	step("Acquire, free name", w, "KeepAlive×1 LeaseGrant×1 Txn×1",
		[][]string{wave("Txn", "KeepAlive")},
		func() (err error) { a, err = l.Acquire(ctx, name, "owner-a", time.Minute); return err })
	step("Acquire, re-entrant", w, "KeepAlive×2 Txn×1",
		[][]string{wave("Txn", "KeepAlive"), wave("KeepAlive")},
		func() error {
			again, err := l.Acquire(ctx, name, "owner-a", time.Minute)
			if err == nil && again.Token != a.Token {
				err = fmt.Errorf("re-entrant Acquire changed the token from %d to %d", a.Token, again.Token)
			}
			return err
		})
	busy := func() error {
		_, err := l.Acquire(ctx, name, "owner-b", time.Minute)
		if !errors.Is(err, lease.ErrHeld) {
			return fmt.Errorf("Acquire of a held name = %v; want ErrHeld", err)
		}
		return nil
	}
	step("Acquire, held by another owner", w, "KeepAlive×1 LeaseTimeToLive×1 Txn×1",
		[][]string{wave("Txn", "KeepAlive"), wave("LeaseTimeToLive")}, busy)
	step("Acquire, held by another owner, again", w, "LeaseTimeToLive×1 Txn×1",
		[][]string{wave("Txn"), wave("LeaseTimeToLive")}, busy)
	step("Renew, same ttl", w, "KeepAlive×1 Txn×1",
		[][]string{wave("Txn", "KeepAlive")},
		func() (err error) { a, err = l.Renew(ctx, a, time.Minute); return err })
	step("Renew, same ttl, by another Locker", ow, "KeepAlive×1 LeaseTimeToLive×1 Txn×1",
		[][]string{wave("Txn"), wave("LeaseTimeToLive"), wave("KeepAlive")},
		func() error { _, err := other.Renew(ctx, a, time.Minute); return err })
	step("Renew, another ttl", w, "KeepAlive×1 LeaseGrant×1 LeaseRevoke×1 Txn×1",
		[][]string{wave("Txn", "KeepAlive")},
		func() (err error) { a, err = l.Renew(ctx, a, 2*time.Minute); return err })
	step("Inspect, held", w, "LeaseTimeToLive×1 Range×1",
		[][]string{wave("Range"), wave("LeaseTimeToLive")},
		func() error { _, err := l.Inspect(ctx, name); return err })
	step("List, one tenure", w, "LeaseTimeToLive×1 Range×1",
		[][]string{wave("Range"), wave("LeaseTimeToLive")},
		func() error { _, err := l.List(ctx, ""); return err })
	stale := a
	stale.Token--
	step("Renew, lost tenure", w, "Txn×1",
		[][]string{wave("Txn")},
		func() error {
			if _, err := l.Renew(ctx, stale, 2*time.Minute); !errors.Is(err, lease.ErrLost) {
				return fmt.Errorf("Renew of a lost tenure = %v; want ErrLost", err)
			}
			return nil
		})
	step("Release, lost tenure", w, "Txn×1",
		[][]string{wave("Txn")},
		func() error {
			if err := l.Release(ctx, stale); !errors.Is(err, lease.ErrLost) {
				return fmt.Errorf("Release of a lost tenure = %v; want ErrLost", err)
			}
			return nil
		})
	step("Release", w, "Txn×1",
		[][]string{wave("Txn")},
		func() error { return l.Release(ctx, a) })
	step("Inspect, free", w, "Range×1",
		[][]string{wave("Range")},
		func() error {
			if _, err := l.Inspect(ctx, name); !errors.Is(err, lease.ErrNotHeld) {
				return fmt.Errorf("Inspect of a free name = %v; want ErrNotHeld", err)
			}
			return nil
		})
	step("Acquire, free name, no spare lease of its ttl", w, "LeaseGrant×1 Txn×1",
		[][]string{wave("LeaseGrant"), wave("Txn")},
		func() (err error) { a, err = l.Acquire(ctx, name, "owner-a", 3*time.Minute); return err })
	step("ForceRelease", w, "DeleteRange×1 LeaseRevoke×1 LeaseTimeToLive×1",
		[][]string{wave("DeleteRange"), wave("LeaseTimeToLive")},
		func() error { _, err := l.ForceRelease(ctx, name); return err })
}

// TestBusyAcquireWritesNothing: an Acquire of a name another owner holds
// changes nothing in etcd: the revision stays. The first one is a
// transaction that may write (a raft entry that changes no key), later
// ones until the holder's time is up only read: the raft index stays.
func TestBusyAcquireWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _ := privateLocker(t)
	if _, err := l.Acquire(ctx, "busy", "holder", time.Minute); err != nil {
		t.Fatal(err)
	}
	status := func() (rev int64, index uint64) {
		t.Helper()
		l.settle()
		st, err := l.s.client.Status(ctx, l.s.client.Endpoints()[0])
		if err != nil {
			t.Fatal(err)
		}
		return st.Header.Revision, st.RaftIndex
	}
	busy := func() {
		t.Helper()
		if _, err := l.Acquire(ctx, "busy", "other", time.Minute); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("Acquire of a held name = %v; want ErrHeld", err)
		}
	}
	rev0, index0 := status()
	busy()
	rev1, index1 := status()
	if rev1 != rev0 {
		t.Fatalf("the first Acquire of a held name moved etcd's revision from %d to %d", rev0, rev1)
	}
	t.Logf("the first Acquire of a held name: %d raft entries", index1-index0)
	for range 10 {
		busy()
	}
	rev2, index2 := status()
	if rev2 != rev1 || index2 != index1 {
		t.Fatalf("10 more Acquires of a held name moved etcd's revision from %d to %d and its raft index from %d to %d; want neither to move", rev1, rev2, index1, index2)
	}
}

// TestRenewByKeepAliveExtendsTheTenure: a Renew with the ttl the tenure
// was granted refreshes its etcd lease, so the tenure outlives its first
// ttl, without a new etcd lease.
//
// Its check falls shortly before the renewed tenure's expiry: it runs
// alone (not parallel).
func TestRenewByKeepAliveExtendsTheTenure(t *testing.T) {
	testenv.Slow(t)
	ctx := context.Background()
	l, w := newLocker(t)
	name := uniqueName("keep-alive")
	const ttl = 2 * time.Second
	held, err := l.Acquire(ctx, name, "owner-a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	before := leaseID(t, l, name)
	time.Sleep(ttl / 2)
	l.settle()
	w.take()
	renewed, err := l.Renew(ctx, held, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if calls, _ := w.take(); !strings.Contains(calls, "LeaseKeepAlive") || strings.Contains(calls, "LeaseGrant") {
		t.Fatalf("Renew with the same ttl sent %s; want a keep-alive and no new etcd lease", calls)
	}
	if after := leaseID(t, l, name); after != before {
		t.Fatalf("Renew with the same ttl moved the key from etcd lease %x to %x", before, after)
	}
	// Past the first ttl and etcd's expiry lag: only the renewal keeps it.
	time.Sleep(ttl/2 + expiryLag + 100*time.Millisecond)
	got, err := l.Inspect(ctx, name)
	if err != nil || got.Token != renewed.Token {
		t.Fatalf("after the first ttl, Inspect = %v, %v; want the renewed tenure %v", got, err, renewed)
	}
	if err := l.Release(ctx, renewed); err != nil {
		t.Fatal(err)
	}
}

// leaseID returns the etcd lease the key of name is attached to.
func leaseID(t testing.TB, l *Locker, name string) int64 {
	t.Helper()
	r, err := l.s.client.Get(context.Background(), l.s.key(name))
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("get %q: %v, %v", name, r, err)
	}
	return r.Kvs[0].Lease
}

// TestReleaseRecyclesTheLease: a Release gives its tenure's etcd lease
// back to the Locker's pool, so the next Acquire of that ttl puts its
// tenure on the same lease, and a Locker that acquires and releases
// writes two raft entries per cycle (the key's put and its delete), as
// concurrency.Mutex does: no LeaseGrant and no LeaseRevoke once the pool
// has its spares.
func TestReleaseRecyclesTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _ := privateLocker(t)
	leaseOfKey := func(name string) clientv3.LeaseID {
		t.Helper()
		r, err := l.s.client.Get(ctx, l.s.key(name))
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("read the key of %q: %v, %d keys", name, err, len(r.Kvs))
		}
		return clientv3.LeaseID(r.Kvs[0].Lease)
	}
	cycle := func(name string) clientv3.LeaseID {
		t.Helper()
		held, err := l.Acquire(ctx, name, "owner", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		id := leaseOfKey(name)
		if err := l.Release(ctx, held); err != nil {
			t.Fatal(err)
		}
		return id
	}
	first := cycle("a")
	if again := cycle("b"); again != first {
		t.Fatalf("the Acquire after a Release put its tenure on etcd lease %x; want %x, the released tenure's", again, first)
	}
	if _, err := l.Inspect(ctx, "a"); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Inspect of the released name = %v; want ErrNotHeld", err)
	}
	index := func() uint64 {
		t.Helper()
		l.settle()
		st, err := l.s.client.Status(ctx, l.s.client.Endpoints()[0])
		if err != nil {
			t.Fatal(err)
		}
		return st.RaftIndex
	}
	for i := range 2 * poolLow {
		cycle(fmt.Sprintf("warm-%d", i))
	}
	const cycles = 20
	before := index()
	for i := range cycles {
		cycle(fmt.Sprintf("c-%d", i))
	}
	entries := index() - before
	t.Logf("%d acquire+release cycles: %d raft entries", cycles, entries)
	if entries > 2*cycles {
		t.Fatalf("%d acquire+release cycles wrote %d raft entries; want at most %d (a put and a delete each)", cycles, entries, 2*cycles)
	}
}
