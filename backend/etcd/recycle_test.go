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
	lo, ok := l.s.known.lease(asTenure(held))
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
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		prepare func(t driver.Tenure, id clientv3.LeaseID, k *known)
		recycle bool
	}{
		{"quiet", func(driver.Tenure, clientv3.LeaseID, *known) {}, true},
		{"keep-alive under way", func(t driver.Tenure, id clientv3.LeaseID, k *known) {
			k.keepAliveStart(t, id)
		}, false},
		{"keep-alive without an answer", func(t driver.Tenure, id clientv3.LeaseID, k *known) {
			k.keepAliveStart(t, id)
			k.keepAliveDone(t, id, false)
		}, false},
		{"keep-alive answered", func(t driver.Tenure, id clientv3.LeaseID, k *known) {
			k.keepAliveStart(t, id)
			k.keepAliveDone(t, id, true)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, w := privateLocker(t)
			held, err := l.Acquire(ctx, "job", "owner", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			id := knownLeaseOf(t, l, held)
			tc.prepare(asTenure(held), id, l.s.known)
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
			if l.s.known.keepAliveStart(asTenure(held), id) {
				t.Fatal("a keep-alive for the released tenure may still go out")
			}
		})
	}
}

// TestEndedStaysBounded: the tenures a Locker remembers as released stay
// at most endedMax, however many it releases, and the latest is always
// among them.
func TestEndedStaysBounded(t *testing.T) {
	k := newKnown()
	exp := time.Now().Add(time.Hour)
	for i := range 3 * endedMax {
		ten := driver.Tenure{Name: "n", Owner: "o", Token: uint64(i + 1), Expires: exp}
		k.rememberSolo(ten, clientv3.LeaseID(i+1), 60)
		if _, ok := k.released(ten); !ok {
			t.Fatalf("tenure %d: a lease with no keep-alive under way is not recyclable", i)
		}
		if len(k.ended) > endedMax {
			t.Fatalf("after %d Releases the Locker remembers %d released tenures; want at most %d", i+1, len(k.ended), endedMax)
		}
		if k.keepAliveStart(ten, clientv3.LeaseID(i+1)) {
			t.Fatalf("tenure %d: a keep-alive may go out right after its Release", i)
		}
	}
}
