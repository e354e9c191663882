package etcdlease

import (
	"context"
	"fmt"
	"time"

	"github.com/leasekit/lease"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// intact is the comparison that identifies the tenure l: its key exists
// with l's create revision (no other tenure has it) and holds l's owner.
func (l *Locker) intact(ls lease.Lease) []clientv3.Cmp {
	key := l.key(ls.Name)
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(key), "=", int64(ls.Token)),
		clientv3.Compare(clientv3.Value(key), "=", ls.Owner),
	}
}

// renewRetries is how many keep-alives Renew tries when concurrent calls
// of the same owner keep moving the tenure onto other etcd leases, before
// it moves the tenure onto a new lease itself.
const renewRetries = 3

// Renew implements lease.Locker.
//
// It reads the tenure's etcd lease in a transaction that checks the tenure
// is intact (create revision = Token, value = owner), refreshes that lease
// with a keep-alive, and checks again that the key is still intact and on
// that lease: three round trips and no write to etcd's log. etcd refuses
// to keep an expired lease alive, so an expired tenure is never revived.
//
// A keep-alive restarts a lease with the TTL it was granted; when ttl
// needs another (whole-second) TTL, Renew then grants a new etcd lease,
// moves the key onto it in a transaction that checks the tenure is intact,
// and revokes the old one: five round trips.
//
// If the tenure is not intact it returns an error matching lease.ErrLost
// and changes nothing.
func (l *Locker) Renew(ctx context.Context, ls lease.Lease, ttl time.Duration) (lease.Lease, error) {
	if err := lease.CheckRenew(ls, ttl); err != nil {
		return lease.Lease{}, err
	}
	if err := l.begin("renew", ls.Name); err != nil {
		return lease.Lease{}, err
	}
	start := time.Now()
	lost := fmt.Errorf("lease/etcd: renew %q token %d: %w", ls.Name, ls.Token, lease.ErrLost)
	for range renewRetries {
		id, ok, err := l.leaseOf(ctx, ls)
		if err != nil {
			return lease.Lease{}, fmt.Errorf("lease/etcd: renew %q: %w", ls.Name, err)
		}
		if !ok {
			return lease.Lease{}, lost
		}
		ka, err := l.client.KeepAliveOnce(ctx, id)
		if isLeaseNotFound(err) {
			// The etcd lease ended after the read: it expired (etcd
			// answers once the key is deleted), the tenure was released,
			// or a concurrent re-entrant Acquire or Renew moved the
			// tenure onto a new lease. Look again.
			continue
		}
		if err != nil {
			return lease.Lease{}, fmt.Errorf("lease/etcd: renew %q: keep-alive: %w", ls.Name, err)
		}
		if ka.TTL != l.grantedTTL(ttl) {
			return l.move(ctx, ls, ttl, start)
		}
		// The keep-alive counts only if the key was still on that lease
		// after it.
		now, ok, err := l.leaseOf(ctx, ls)
		if err != nil {
			return lease.Lease{}, fmt.Errorf("lease/etcd: renew %q: %w", ls.Name, err)
		}
		if !ok {
			return lease.Lease{}, lost
		}
		if now == id {
			return l.lease(ls.Name, ls.Owner, int64(ls.Token), start, ttl, ka.TTL), nil
		}
		// A concurrent Renew moved the tenure onto another lease: again.
	}
	// Concurrent calls kept moving the tenure between etcd leases: settle
	// it with one owner-checked transaction.
	return l.move(ctx, ls, ttl, start)
}

// leaseOf returns the etcd lease of the tenure ls, with ok false if the
// tenure is not intact.
func (l *Locker) leaseOf(ctx context.Context, ls lease.Lease) (id clientv3.LeaseID, ok bool, err error) {
	r, err := l.client.Txn(ctx).If(l.intact(ls)...).Then(clientv3.OpGet(l.key(ls.Name))).Commit()
	if err != nil {
		return clientv3.NoLease, false, err
	}
	if !r.Succeeded {
		return clientv3.NoLease, false, nil
	}
	kvs := r.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return clientv3.NoLease, false, fmt.Errorf("etcd returned no value for an existing key")
	}
	return clientv3.LeaseID(kvs[0].Lease), true, nil
}

// move renews the tenure ls for a ttl its etcd lease was not granted: it
// grants a new etcd lease and, in one transaction that checks the tenure
// is intact, moves the key onto it, then revokes the old lease.
func (l *Locker) move(ctx context.Context, ls lease.Lease, ttl time.Duration, start time.Time) (lease.Lease, error) {
	g, err := l.grant(ctx, ttl)
	if err != nil {
		return lease.Lease{}, fmt.Errorf("lease/etcd: renew %q: grant etcd lease: %w", ls.Name, err)
	}
	resp, err := l.client.Txn(ctx).
		If(l.intact(ls)...).
		Then(clientv3.OpPut(l.key(ls.Name), ls.Owner, clientv3.WithLease(g.ID), clientv3.WithPrevKV())).
		Commit()
	if err != nil {
		// The new lease is left to expire: the put may have been applied.
		return lease.Lease{}, fmt.Errorf("lease/etcd: renew %q: %w", ls.Name, err)
	}
	if !resp.Succeeded {
		l.cleanup(ctx, g.ID)
		return lease.Lease{}, fmt.Errorf("lease/etcd: renew %q token %d: %w", ls.Name, ls.Token, lease.ErrLost)
	}
	if prev := resp.Responses[0].GetResponsePut().GetPrevKv(); prev != nil {
		l.cleanup(ctx, clientv3.LeaseID(prev.Lease))
	}
	return l.lease(ls.Name, ls.Owner, int64(ls.Token), start, ttl, g.TTL), nil
}

// Release implements lease.Locker.
//
// It deletes the key in a transaction that checks the tenure is intact
// (create revision = Token, value = owner), so a retried or stale Release
// can never delete a later tenure, then revokes the tenure's etcd lease.
// If the tenure is not intact it changes nothing and returns an error
// matching lease.ErrLost.
func (l *Locker) Release(ctx context.Context, ls lease.Lease) error {
	if err := lease.CheckLease(ls); err != nil {
		return err
	}
	if err := l.begin("release", ls.Name); err != nil {
		return err
	}
	resp, err := l.client.Txn(ctx).
		If(l.intact(ls)...).
		Then(clientv3.OpDelete(l.key(ls.Name), clientv3.WithPrevKV())).
		Commit()
	if err != nil {
		return fmt.Errorf("lease/etcd: release %q: %w", ls.Name, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("lease/etcd: release %q token %d: %w", ls.Name, ls.Token, lease.ErrLost)
	}
	for _, prev := range resp.Responses[0].GetResponseDeleteRange().GetPrevKvs() {
		l.cleanup(ctx, clientv3.LeaseID(prev.Lease))
	}
	return nil
}
