package etcdlease

import (
	"context"
	"fmt"
	"time"

	"github.com/leasekit/lease"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// busyRetries is how many times Acquire tries again when the holder it
// found vanished before its remaining time could be read: the name may
// have just become free.
const busyRetries = 3

// Acquire implements lease.Locker.
//
// It grants an etcd lease of ttl rounded up to whole seconds, then, in one
// transaction, creates the key on that lease if it does not exist, or
// moves it onto that lease if owner holds it (keeping its create
// revision, the Token), or reads the holder. A re-entrant Acquire then
// revokes the tenure's previous etcd lease; a refused one revokes the
// lease it granted and asks etcd how long the holder's lease has left.
//
// If the transaction fails without an answer (a network error, ctx done),
// the granted lease is left to expire by itself: the transaction may have
// been applied, and the tenure it started or extended must keep its lease.
func (l *Locker) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	if err := lease.CheckAcquire(name, owner, ttl); err != nil {
		return lease.Lease{}, err
	}
	if err := l.begin("acquire", name); err != nil {
		return lease.Lease{}, err
	}
	start := time.Now()
	g, err := l.grant(ctx, ttl)
	if err != nil {
		return lease.Lease{}, fmt.Errorf("lease/etcd: acquire %q: grant etcd lease: %w", name, err)
	}
	key := l.key(name)
	var holder string
	var remaining time.Duration
	for range busyRetries {
		resp, err := l.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, owner, clientv3.WithLease(g.ID))).
			Else(clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", owner)},
				[]clientv3.Op{clientv3.OpPut(key, owner, clientv3.WithLease(g.ID), clientv3.WithPrevKV())},
				[]clientv3.Op{clientv3.OpGet(key)},
			)).
			Commit()
		if err != nil {
			return lease.Lease{}, fmt.Errorf("lease/etcd: acquire %q: %w", name, err)
		}
		if resp.Succeeded {
			// A new key: its create revision is the transaction's revision.
			return l.lease(name, owner, resp.Header.Revision, start, ttl, g.TTL), nil
		}
		inner := resp.Responses[0].GetResponseTxn()
		if inner.Succeeded {
			// Re-entrant: the key moved onto the new lease; the old one
			// holds nothing now.
			prev := inner.Responses[0].GetResponsePut().GetPrevKv()
			if prev == nil {
				return lease.Lease{}, fmt.Errorf("lease/etcd: acquire %q: etcd returned no previous value for a re-entrant put", name)
			}
			l.cleanup(ctx, clientv3.LeaseID(prev.Lease))
			return l.lease(name, owner, prev.CreateRevision, start, ttl, g.TTL), nil
		}
		kvs := inner.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			return lease.Lease{}, fmt.Errorf("lease/etcd: acquire %q: etcd returned no holder for an existing key", name)
		}
		if kvs[0].Lease == int64(clientv3.NoLease) {
			l.cleanup(ctx, g.ID)
			return lease.Lease{}, fmt.Errorf("lease/etcd: acquire %q: key %q has no etcd lease: another program writes under the prefix %q", name, key, l.prefix)
		}
		holder = string(kvs[0].Value)
		var ok bool
		remaining, ok, err = l.remaining(ctx, clientv3.LeaseID(kvs[0].Lease))
		if err != nil {
			l.cleanup(ctx, g.ID)
			return lease.Lease{}, fmt.Errorf("lease/etcd: acquire %q: read the holder's remaining time: %w", name, err)
		}
		if ok {
			break
		}
		// The holder's etcd lease ended or changed after the transaction
		// read it: look again, with the lease already granted.
		remaining = time.Second
	}
	l.cleanup(ctx, g.ID)
	return lease.Lease{}, &lease.HeldError{Name: name, Owner: holder, Remaining: remaining}
}
