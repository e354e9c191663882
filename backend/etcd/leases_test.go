package etcdlease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// leasesOf returns the etcd leases that exist on l's cluster once the
// revocations l's calls started are done.
func leasesOf(t testing.TB, l *Locker) []clientv3.LeaseStatus {
	t.Helper()
	l.settle()
	r, err := l.s.client.Leases(context.Background())
	if err != nil {
		t.Fatalf("list etcd leases: %v", err)
	}
	return r.Leases
}

// privateLocker returns a Locker on an embedded etcd server of its own,
// always (even with LEASE_TEST_ETCD set), so that counting the cluster's
// etcd leases counts only this test's.
func privateLocker(t testing.TB) (*Locker, *wire) {
	t.Helper()
	srv, err := etcdtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	w := newWire()
	return mustNew(t, newClient(t, srv.Endpoints(), w)), w
}

// TestNoEtcdLeaseOutlivesItsTenure counts the cluster's etcd leases
// around every operation: each live tenure has exactly one, and none is
// left when no tenure is.
func TestNoEtcdLeaseOutlivesItsTenure(t *testing.T) {
	ctx := context.Background()
	l, _ := privateLocker(t)
	want := func(n int, after string) {
		t.Helper()
		if got := len(leasesOf(t, l)); got != n {
			t.Fatalf("after %s: %d etcd leases exist, want %d", after, got, n)
		}
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
	if err := l.Release(ctx, forged); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Release with a wrong token = %v; want ErrLost", err)
	}
	want(1, "a refused Release")
	if err := l.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	want(0, "Release")

	b, err := l.Acquire(ctx, "b", "owner-b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want(1, "a second Acquire")
	ended, err := l.ForceRelease(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if ended.Token != b.Token || ended.Owner != "owner-b" {
		t.Fatalf("ForceRelease returned %v; want the tenure %v", ended, b)
	}
	want(0, "ForceRelease")
}

// TestRoundTrips counts the requests each operation sends and holds them
// to the numbers in the package documentation. Run with -v to see them.
func TestRoundTrips(t *testing.T) {
	ctx := context.Background()
	l, w := newLocker(t)
	name := uniqueName("round-trips")
	check := func(op string, want int) {
		t.Helper()
		l.settle()
		calls, n := w.take()
		t.Logf("%-36s %d round trips: %s", op, n, calls)
		if n != want {
			t.Errorf("%s took %d round trips (%s); want %d", op, n, calls, want)
		}
	}
	w.take()

	a, err := l.Acquire(ctx, name, "owner-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	check("Acquire, free name", 2)
	if again, err := l.Acquire(ctx, name, "owner-a", time.Minute); err != nil || again.Token != a.Token {
		t.Fatalf("re-entrant Acquire = %v, %v; want token %d", again, err, a.Token)
	}
	check("Acquire, re-entrant", 3)
	if _, err := l.Acquire(ctx, name, "owner-b", time.Minute); !errors.Is(err, lease.ErrHeld) {
		t.Fatal(err)
	}
	check("Acquire, held by another owner", 4)
	if a, err = l.Renew(ctx, a, time.Minute); err != nil {
		t.Fatal(err)
	}
	check("Renew, same ttl (keep-alive)", 3)
	if a, err = l.Renew(ctx, a, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	check("Renew, another ttl (new etcd lease)", 5)
	if _, err := l.Inspect(ctx, name); err != nil {
		t.Fatal(err)
	}
	check("Inspect, held", 2)
	if _, err := l.List(ctx, ""); err != nil {
		t.Fatal(err)
	}
	check("List, one tenure", 2)
	stale := a
	stale.Token--
	if _, err := l.Renew(ctx, stale, time.Minute); !errors.Is(err, lease.ErrLost) {
		t.Fatal(err)
	}
	check("Renew, lost tenure", 1)
	if err := l.Release(ctx, stale); !errors.Is(err, lease.ErrLost) {
		t.Fatal(err)
	}
	check("Release, lost tenure", 1)
	if err := l.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	check("Release", 2)
	if _, err := l.Inspect(ctx, name); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatal(err)
	}
	check("Inspect, free", 1)
	if _, err := l.Acquire(ctx, name, "owner-a", time.Minute); err != nil {
		t.Fatal(err)
	}
	l.settle()
	w.take()
	if _, err := l.ForceRelease(ctx, name); err != nil {
		t.Fatal(err)
	}
	check("ForceRelease", 3)
}

// TestRenewByKeepAliveExtendsTheTenure: a Renew with the ttl the tenure
// was granted refreshes its etcd lease, so the tenure outlives its first
// ttl, without a new etcd lease.
func TestRenewByKeepAliveExtendsTheTenure(t *testing.T) {
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
