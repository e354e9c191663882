package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// busyRetries is how many times Acquire tries again when the holder it
// found vanished before its remaining time could be read: the name may
// have just become free.
const busyRetries = 3

// Acquire implements driver.Store.
//
// It grants an etcd lease of ttl rounded up to whole seconds, then, in one
// transaction, creates the key on that lease if it does not exist, or
// moves it onto that lease if owner holds it (keeping its create
// revision, the Token), or reads the holder. A re-entrant Acquire then
// revokes the tenure's previous etcd lease; a refused one asks etcd how
// long the holder's lease has left and revokes the lease it granted. The
// revocations run after the call returns (see revoker).
//
// If the transaction fails without an answer (a network error, ctx done),
// the granted lease is left to expire by itself: the transaction may have
// been applied, and the tenure it started or extended must keep its lease.
func (s *store) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (driver.Tenure, error) {
	start := time.Now()
	g, err := s.grant(ctx, ttl)
	if err != nil {
		return driver.Tenure{}, fmt.Errorf("grant etcd lease: %w", err)
	}
	key := s.key(name)
	var holder *mvccpb.KeyValue
	var remaining time.Duration
	for range busyRetries {
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, owner, clientv3.WithLease(g.ID))).
			Else(clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", owner)},
				[]clientv3.Op{clientv3.OpPut(key, owner, clientv3.WithLease(g.ID), clientv3.WithPrevKV())},
				[]clientv3.Op{clientv3.OpGet(key)},
			)).
			Commit()
		if err != nil {
			return driver.Tenure{}, err
		}
		if resp.Succeeded {
			// A new key: its create revision is the transaction's revision.
			return held(name, owner, resp.Header.Revision, start, g.TTL), nil
		}
		inner := resp.Responses[0].GetResponseTxn()
		if inner.Succeeded {
			// Re-entrant: the key moved onto the new lease; the old one
			// holds nothing now.
			prev := inner.Responses[0].GetResponsePut().GetPrevKv()
			if prev == nil {
				return driver.Tenure{}, errors.New("etcd returned no previous value for a re-entrant put")
			}
			s.revokes.revoke(ctx, clientv3.LeaseID(prev.Lease))
			return held(name, owner, prev.CreateRevision, start, g.TTL), nil
		}
		kvs := inner.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			return driver.Tenure{}, errors.New("etcd returned no holder for an existing key")
		}
		holder = kvs[0]
		if holder.Lease == int64(clientv3.NoLease) {
			s.revokes.revoke(ctx, g.ID)
			return driver.Tenure{}, fmt.Errorf("key %q has no etcd lease: another program writes under the prefix %q", key, s.prefix)
		}
		var ok bool
		remaining, ok, err = s.remaining(ctx, clientv3.LeaseID(holder.Lease))
		if err != nil {
			s.revokes.revoke(ctx, g.ID)
			return driver.Tenure{}, fmt.Errorf("read the holder's remaining time: %w", err)
		}
		if ok {
			break
		}
		// The holder's etcd lease ended or changed after the transaction
		// read it: look again, with the lease already granted.
		remaining = time.Second
	}
	s.revokes.revoke(ctx, g.ID)
	return driver.Tenure{
		Name:      name,
		Owner:     string(holder.Value),
		Token:     uint64(holder.CreateRevision),
		Remaining: remaining,
	}, nil
}
