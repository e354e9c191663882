package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/batchtest"
)

// acquireMany acquires n names for owner on l.
func acquireMany(t testing.TB, l *Locker, label, owner string, n int, ttl time.Duration) []lease.Lease {
	t.Helper()
	held := make([]lease.Lease, n)
	for i := range held {
		var err error
		if held[i], err = l.Acquire(context.Background(), uniqueName(label), owner, ttl); err != nil {
			t.Fatal(err)
		}
	}
	return held
}

func requests(held []lease.Lease, ttl time.Duration) []batchtest.Req {
	reqs := make([]batchtest.Req, len(held))
	for i, h := range held {
		reqs[i] = batchtest.Req{Lease: h, TTL: ttl}
	}
	return reqs
}

// repeat is n copies of method, for a wave.
func repeat(method string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = method
	}
	return out
}

// TestRenewBatchRoundTrips: a batch of renewals costs one round trip
// however large it is, when the Locker knows the tenures' leases (n
// keep-alives on the stream and ⌈n/128⌉ read transactions, all sent before
// any answer), and two when it does not (the reads, then the keep-alives).
// Run with -v to see the counts.
func TestRenewBatchRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, w := newLocker(t)
	ow := newWire()
	other := mustNew(t, newClient(t, testEndpoints, ow), WithPrefix(l.Prefix()))
	warm(t, l, time.Minute)
	warm(t, other, time.Minute)
	for _, n := range []int{1, 10, 300} {
		held := acquireMany(t, l, "batch-rt", "owner", n, time.Minute)
		l.settle()
		w.take()
		txns := (n + maxTxnOps - 1) / maxTxnOps
		var res []batchtest.Res
		err := w.waves(t, func() error {
			res = batchtest.RenewBatch(ctx, l, requests(held, time.Minute))
			return nil
		}, append(repeat("KeepAlive", n), repeat("Txn", txns)...))
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Lease.Token != held[i].Token {
				t.Fatalf("batch of %d, item %d: %v, %v", n, i, r.Lease, r.Err)
			}
		}
		calls, total := w.take()
		t.Logf("a batch of %3d renewals by the Locker that acquired them: 1 round trip, %d requests: %s", n, total, calls)
		if want := fmt.Sprintf("KeepAlive×%d Txn×%d", n, txns); calls != want {
			t.Errorf("a batch of %d renewals sent %s; want %s", n, calls, want)
		}

		ow.take()
		err = ow.waves(t, func() error {
			res = batchtest.RenewBatch(ctx, other, requests(held, time.Minute))
			return nil
		}, repeat("Txn", txns), repeat("LeaseTimeToLive", n), repeat("KeepAlive", n))
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Lease.Token != held[i].Token {
				t.Fatalf("batch of %d by another Locker, item %d: %v, %v", n, i, r.Lease, r.Err)
			}
		}
		calls, total = ow.take()
		t.Logf("a batch of %3d renewals by another Locker:          3 round trips, %d requests: %s", n, total, calls)
		if want := fmt.Sprintf("KeepAlive×%d LeaseTimeToLive×%d Txn×%d", n, n, txns); calls != want {
			t.Errorf("a batch of %d renewals by another Locker sent %s; want %s", n, calls, want)
		}
	}
}

// TestRenewBatchGivesRenewsAnswers: a batch mixing tenures whose leases
// the Locker knows, tenures acquired elsewhere, a ttl that needs another
// etcd lease, released, forged and taken-over tenures gives each the
// answer Renew gives, and renews each for its own ttl.
func TestRenewBatchGivesRenewsAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, _ := newLocker(t)
	other := mustNew(t, newClient(t, testEndpoints, nil), WithPrefix(l.Prefix()))
	mine := acquireMany(t, l, "mine", "owner-a", 3, time.Minute)
	theirs := acquireMany(t, other, "theirs", "owner-a", 2, time.Minute)
	released := acquireMany(t, l, "released", "owner-a", 1, time.Minute)[0]
	if err := l.Release(ctx, released); err != nil {
		t.Fatal(err)
	}
	taken := acquireMany(t, l, "taken", "owner-a", 1, time.Minute)[0]
	if _, err := other.ForceRelease(ctx, taken.Name); err != nil {
		t.Fatal(err)
	}
	taker, err := other.Acquire(ctx, taken.Name, "owner-b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	forged := mine[0]
	forged.Token++

	reqs := []batchtest.Req{
		{Lease: mine[0], TTL: time.Minute},
		{Lease: mine[1], TTL: 2 * time.Minute}, // another etcd lease
		{Lease: theirs[0], TTL: time.Minute},
		{Lease: theirs[1], TTL: 3 * time.Minute},
		{Lease: released, TTL: time.Minute},
		{Lease: taken, TTL: time.Minute},
		{Lease: forged, TTL: time.Minute},
		{Lease: mine[2], TTL: time.Minute},
	}
	res := batchtest.RenewBatch(ctx, l, reqs)
	for i, r := range res {
		lost := i >= 4 && i <= 6
		if lost {
			if !errors.Is(r.Err, lease.ErrLost) {
				t.Errorf("item %d (%s): %v; want ErrLost", i, reqs[i].Lease.Name, r.Err)
			}
			continue
		}
		if r.Err != nil || r.Lease.Token != reqs[i].Lease.Token {
			t.Errorf("item %d (%s): %v, %v; want it renewed", i, reqs[i].Lease.Name, r.Lease, r.Err)
			continue
		}
		got, err := l.Inspect(ctx, reqs[i].Lease.Name)
		if err != nil {
			t.Fatal(err)
		}
		// Inspect's Expires is within a second of the truth.
		if d := got.Expires.Sub(time.Now().Add(reqs[i].TTL)); d < -2*time.Second || d > 2*time.Second {
			t.Errorf("item %d renewed for %s: Inspect says it expires %s from now", i, reqs[i].TTL, time.Until(got.Expires).Round(time.Second))
		}
	}
	if got, err := l.Inspect(ctx, taken.Name); err != nil || got.Token != taker.Token {
		t.Fatalf("the taken-over name after the batch: %v, %v; want %v", got, err, taker)
	}
	if _, err := l.Inspect(ctx, released.Name); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("the released name after the batch: %v; want ErrNotHeld", err)
	}
}

// TestRenewBatchOnAStalledStore: a batch on a store that stops answering
// returns by its context's deadline, each item with a store error.
//
// It checks a deadline: it runs alone (not parallel).
func TestRenewBatchOnAStalledStore(t *testing.T) {
	l, w := newLocker(t)
	held := acquireMany(t, l, "batch-stall", "owner", 20, time.Minute)
	w.stall("Txn")
	defer w.unstall()
	res := []batchtest.Res{}
	err := timed(t, "RenewBatch of 20 on a stalled store", func(ctx context.Context) error {
		res = batchtest.RenewBatch(ctx, l, requests(held, time.Minute))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		mustBeFailure(t, fmt.Sprintf("item %d of a batch on a stalled store", i), r.Err, context.DeadlineExceeded)
		if !strings.Contains(r.Err.Error(), "renew") {
			t.Fatalf("item %d: %v does not say which call failed", i, r.Err)
		}
	}
}
