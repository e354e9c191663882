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

// Renew implements lease.Locker.
//
// It grants a new etcd lease of ttl rounded up to whole seconds and, in
// one transaction that checks the tenure is intact (create revision =
// Token, value = owner), moves the key onto it; then it revokes the
// tenure's previous etcd lease. A new lease rather than a keep-alive lets
// every Renew set any ttl, and the transaction is what makes it
// owner-checked. If the tenure is not intact it revokes the new lease and
// returns an error matching lease.ErrLost.
func (l *Locker) Renew(ctx context.Context, ls lease.Lease, ttl time.Duration) (lease.Lease, error) {
	if err := lease.CheckRenew(ls, ttl); err != nil {
		return lease.Lease{}, err
	}
	if err := l.begin("renew", ls.Name); err != nil {
		return lease.Lease{}, err
	}
	start := time.Now()
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
