package etcdlease

import (
	"testing"
	"time"

	"github.com/leasekit/lease/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestSweepNeverRevokesAGroup is the sweep-versus-re-entry race of issue
// 31: a group carries n1 and n2; n2 is released; n1's Expires has just
// passed, but etcd, which looks for expired leases about every 500ms,
// still holds the group's lease, and n1's owner re-enters it, keeping the
// lease alive. A sweep of the ledger at that moment must not decide to
// revoke the lease (before the ledger, the sweep dropped n1, emptied the
// group and revoked it under the re-entered tenure); and a record the
// sweep forgets whole is another Locker's from then on, never revoked.
func TestSweepNeverRevokesAGroup(t *testing.T) {
	t.Parallel()
	const g = clientv3.LeaseID(7)
	past := time.Now().Add(-10 * time.Millisecond)
	n1 := driver.Tenure{Name: "n1", Owner: "o", Token: 1, Expires: past}
	n2 := driver.Tenure{Name: "n2", Owner: "o", Token: 2, Expires: past}
	var ds []disposal
	for _, forget := range []bool{false, true} {
		l := newLedger()
		l.lent(g, 3, past.Add(-3*time.Second), 2)
		ds = append(ds, l.began(g, n1, 3, clientv3.NoLease)...)
		ds = append(ds, l.began(g, n2, 3, clientv3.NoLease)...)
		ds = append(ds, l.removed(n2, g, true)...)
		// The sweep: of what etcd has surely ended, or (forget) of all.
		l.mu.Lock()
		by := time.Now().Add(-forgetAfter)
		if forget {
			by = time.Now().Add(time.Hour)
		}
		l.sweep(by)
		l.mu.Unlock()
		// n1's owner re-enters: a keep-alive of the group's lease.
		alone, own := l.alone(n1, g)
		if own != !forget || (own && !alone) {
			t.Fatalf("forget %v: alone(n1) = %v, own %v", forget, alone, own)
		}
		if l.keepAliveStart(n1, g) {
			l.keepAliveDone(g, true)
			l.kept(driver.Tenure{Name: "n1", Owner: "o", Token: 1, Expires: time.Now().Add(3 * time.Second)}, g, 3)
		}
		if forget {
			// Whatever happens to n1 now, a forgotten lease is not
			// this Locker's to revoke.
			ds = append(ds, l.removed(n1, g, true)...)
		}
	}
	if len(ds) > 0 {
		t.Fatalf("the ledger allowed %v for the group's lease while its tenure was re-entered", ds)
	}
}

// TestLedgerDisposals: what the ledger allows for an own lease once
// nothing is known to be on it, by what happened to it.
func TestLedgerDisposals(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ten := func(name string) driver.Tenure {
		return driver.Tenure{Name: name, Owner: "o", Token: 1, Expires: now.Add(time.Minute)}
	}
	for _, tc := range []struct {
		name string
		run  func(g *ledger, id clientv3.LeaseID) []disposal
		want disposalKind
	}{
		{"released, quiet", func(g *ledger, id clientv3.LeaseID) []disposal {
			g.lent(id, 60, now, 1)
			g.began(id, ten("a"), 60, clientv3.NoLease)
			return g.removed(ten("a"), id, true)
		}, reuse},
		{"unused", func(g *ledger, id clientv3.LeaseID) []disposal {
			g.lent(id, 60, now, 1)
			return []disposal{g.unused(id)}
		}, reuse},
		{"group, all released", func(g *ledger, id clientv3.LeaseID) []disposal {
			g.lent(id, 60, now, 2)
			g.began(id, ten("a"), 60, clientv3.NoLease)
			g.unused(id)
			return g.removed(ten("a"), id, true)
		}, revoke},
		{"group, one unanswered", func(g *ledger, id clientv3.LeaseID) []disposal {
			g.lent(id, 60, now, 2)
			g.unanswered(id, "x", "o")
			g.began(id, ten("a"), 60, clientv3.NoLease)
			return g.removed(ten("a"), id, true)
		}, keep},
		{"group, one still pending", func(g *ledger, id clientv3.LeaseID) []disposal {
			g.lent(id, 60, now, 2)
			g.began(id, ten("a"), 60, clientv3.NoLease)
			return g.removed(ten("a"), id, true)
		}, keep},
		{"unanswered alone, adopted, released", func(g *ledger, id clientv3.LeaseID) []disposal {
			g.lent(id, 60, now, 1)
			g.unanswered(id, "a", "o")
			if !g.keepAliveStart(ten("a"), id) {
				t.Fatal("the tenure its one unanswered write was for cannot be adopted")
			}
			if g.keepAliveStart(ten("b"), id) {
				t.Fatal("another tenure can be adopted on a lease in doubt")
			}
			g.keepAliveDone(id, true)
			g.kept(ten("a"), id, 60)
			return g.removed(ten("a"), id, true)
		}, reuse}, // found on it: the one write in doubt was applied
		{"unanswered alone, released elsewhere", func(g *ledger, id clientv3.LeaseID) []disposal {
			// Another Locker of the owner re-entered the tenure and
			// released it; this one never saw it on the lease.
			g.lent(id, 60, now, 1)
			g.unanswered(id, "a", "o")
			return g.removed(ten("a"), id, true)
		}, keep},
		{"force-released", func(g *ledger, id clientv3.LeaseID) []disposal {
			g.lent(id, 60, now, 1)
			g.began(id, ten("a"), 60, clientv3.NoLease)
			return g.removed(ten("a"), id, false)
		}, revoke}, // its holder may still be renewing
		{"keep-alive unanswered", func(g *ledger, id clientv3.LeaseID) []disposal {
			g.lent(id, 60, now, 1)
			g.began(id, ten("a"), 60, clientv3.NoLease)
			g.keepAliveStart(ten("a"), id)
			g.keepAliveDone(id, false)
			return g.removed(ten("a"), id, true)
		}, revoke},
		{"moved off", func(g *ledger, id clientv3.LeaseID) []disposal {
			g.lent(id, 60, now, 1)
			g.began(id, ten("a"), 60, clientv3.NoLease)
			g.lent(id+1, 60, now, 1)
			return g.began(id+1, ten("a"), 60, id)
		}, revoke}, // another Locker may renew it still
	} {
		t.Run(tc.name, func(t *testing.T) {
			const id = clientv3.LeaseID(100)
			ds := tc.run(newLedger(), id)
			got := keep
			for _, d := range ds {
				if d.id == id {
					got = d.what
				}
			}
			if got != tc.want {
				t.Fatalf("disposal %v (%v); want %v", got, ds, tc.want)
			}
		})
	}
}
