package etcdlease

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// spareIDs returns the etcd leases waiting in l's pool.
func spareIDs(l *Locker) []clientv3.LeaseID {
	l.s.pool.mu.Lock()
	defer l.s.pool.mu.Unlock()
	var ids []clientv3.LeaseID
	for _, c := range l.s.pool.classes {
		for _, p := range c.spare {
			ids = append(ids, p.id)
		}
	}
	return ids
}

// knownLeaseOf returns the etcd lease the Locker knows held's tenure on.
func knownLeaseOf(t testing.TB, l *Locker, held lease.Lease) clientv3.LeaseID {
	t.Helper()
	lo, ok := l.s.ledger.lease(asTenure(held))
	if !ok {
		t.Fatalf("the Locker does not know the etcd lease of %v", held)
	}
	return lo.id
}

func asTenure(ls lease.Lease) driver.Tenure {
	return driver.Tenure{Name: ls.Name, Owner: ls.Owner, Token: ls.Token}
}

// TestReleaseRecyclesOnlyAQuietLease: a Release puts its tenure's etcd
// lease back in the pool only when no keep-alive of it for the tenure is
// under way or failed without an answer; such a keep-alive could be
// applied after the lease carries the next tenure, and keep that one
// alive past its own ttl. After the Release, no keep-alive goes out for
// the released tenure.
func TestReleaseRecyclesOnlyAQuietLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		prepare func(t driver.Tenure, id clientv3.LeaseID, g *ledger)
		recycle bool
	}{
		{"quiet", func(driver.Tenure, clientv3.LeaseID, *ledger) {}, true},
		{"keep-alive under way", func(t driver.Tenure, id clientv3.LeaseID, g *ledger) {
			g.keepAliveStart(t, id)
		}, false},
		{"keep-alive without an answer", func(t driver.Tenure, id clientv3.LeaseID, g *ledger) {
			g.keepAliveStart(t, id)
			g.keepAliveDone(id, false)
		}, false},
		{"keep-alive answered", func(t driver.Tenure, id clientv3.LeaseID, g *ledger) {
			g.keepAliveStart(t, id)
			g.keepAliveDone(id, true)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, w := privateLocker(t)
			held, err := l.Acquire(ctx, "job", "owner", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			id := knownLeaseOf(t, l, held)
			tc.prepare(asTenure(held), id, l.s.ledger)
			if err := l.Release(ctx, held); err != nil {
				t.Fatal(err)
			}
			l.settle()
			if got := slices.Contains(spareIDs(l), id); got != tc.recycle {
				t.Fatalf("the released tenure's etcd lease is in the pool: %v; want %v", got, tc.recycle)
			}
			if !tc.recycle {
				if r, err := l.s.client.TimeToLive(ctx, id); err == nil && r.TTL > 0 {
					t.Fatalf("the released tenure's etcd lease was neither recycled nor revoked (TTL %ds left)", r.TTL)
				}
			}
			w.take()
			if _, err := l.Renew(ctx, held, time.Minute); !errors.Is(err, lease.ErrLost) {
				t.Fatalf("Renew of the released tenure = %v; want ErrLost", err)
			}
			if calls, _ := w.take(); calls != "Txn×1" {
				t.Fatalf("Renew of the released tenure sent %s; want only the Txn that finds it gone", calls)
			}
			if l.s.ledger.keepAliveStart(asTenure(held), id) {
				t.Fatal("a keep-alive for the released tenure may still go out")
			}
		})
	}
}

// TestLedgerStaysBounded: the ledger holds about ledgerSweep records
// however many tenures a Locker acquires and releases, once etcd has
// surely ended their leases; and right after its Release, no keep-alive
// may go out for a tenure.
func TestLedgerStaysBounded(t *testing.T) {
	t.Parallel()
	g := newLedger()
	past := time.Now().Add(-2 * forgetAfter)
	for i := range 3 * ledgerSweep {
		id := clientv3.LeaseID(i + 1)
		ten := driver.Tenure{Name: "n", Owner: "o", Token: uint64(i + 1), Expires: past}
		g.lent(id, 60, past.Add(-time.Minute), 1)
		g.began(id, ten, 60, clientv3.NoLease)
		ds := g.removed(ten, id, true)
		if len(ds) != 1 || ds[0].what != reuse {
			t.Fatalf("tenure %d: a lease with no keep-alive under way is not reusable: %v", i, ds)
		}
		if n := len(g.leases) + len(g.tenures); n > 2*ledgerSweep {
			t.Fatalf("after %d Releases the ledger holds %d records; want at most %d", i+1, n, 2*ledgerSweep)
		}
		if g.keepAliveStart(ten, id) {
			t.Fatalf("tenure %d: a keep-alive may go out right after its Release", i)
		}
	}
}
