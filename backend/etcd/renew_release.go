package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// intact is the comparison that identifies the tenure t: its key exists
// with t's create revision (no other tenure has it) and holds t's owner.
func (s *store) intact(t driver.Tenure) []clientv3.Cmp {
	key := s.key(t.Name)
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(key), "=", int64(t.Token)),
		clientv3.Compare(clientv3.Value(key), "=", t.Owner),
	}
}

// renewRetries is how many keep-alives Renew tries when concurrent calls
// of the same owner keep moving the tenure onto other etcd leases, before
// it moves the tenure onto a new lease itself.
const renewRetries = 3

// Renew implements driver.Store.
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
// If the tenure is not intact it returns ok false and changes nothing.
func (s *store) Renew(ctx context.Context, t driver.Tenure, ttl time.Duration) (driver.Tenure, bool, error) {
	start := time.Now()
	for range renewRetries {
		id, ok, err := s.leaseOf(ctx, t)
		if err != nil || !ok {
			return driver.Tenure{}, false, err
		}
		ka, err := s.client.KeepAliveOnce(ctx, id)
		if isLeaseNotFound(err) {
			// The etcd lease ended after the read: it expired (etcd
			// answers once the key is deleted), the tenure was released,
			// or a concurrent re-entrant Acquire or Renew moved the
			// tenure onto a new lease. Look again.
			continue
		}
		if err != nil {
			return driver.Tenure{}, false, fmt.Errorf("keep-alive: %w", err)
		}
		if ka.TTL != s.grantedTTL(ttl) {
			return s.move(ctx, t, ttl, start)
		}
		// The keep-alive counts only if the key was still on that lease
		// after it.
		now, ok, err := s.leaseOf(ctx, t)
		if err != nil || !ok {
			return driver.Tenure{}, false, err
		}
		if now == id {
			return held(t.Name, t.Owner, int64(t.Token), start, ka.TTL), true, nil
		}
		// A concurrent Renew moved the tenure onto another lease: again.
	}
	// Concurrent calls kept moving the tenure between etcd leases: settle
	// it with one owner-checked transaction.
	return s.move(ctx, t, ttl, start)
}

// leaseOf returns the etcd lease of the tenure t, with ok false if the
// tenure is not intact.
func (s *store) leaseOf(ctx context.Context, t driver.Tenure) (id clientv3.LeaseID, ok bool, err error) {
	r, err := s.client.Txn(ctx).If(s.intact(t)...).Then(clientv3.OpGet(s.key(t.Name))).Commit()
	if err != nil {
		return clientv3.NoLease, false, err
	}
	if !r.Succeeded {
		return clientv3.NoLease, false, nil
	}
	kvs := r.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return clientv3.NoLease, false, errors.New("etcd returned no value for an existing key")
	}
	return clientv3.LeaseID(kvs[0].Lease), true, nil
}

// move renews the tenure t for a ttl its etcd lease was not granted: it
// grants a new etcd lease and, in one transaction that checks the tenure
// is intact, moves the key onto it, then revokes the old lease.
func (s *store) move(ctx context.Context, t driver.Tenure, ttl time.Duration, start time.Time) (driver.Tenure, bool, error) {
	g, err := s.grant(ctx, ttl)
	if err != nil {
		return driver.Tenure{}, false, fmt.Errorf("grant etcd lease: %w", err)
	}
	resp, err := s.client.Txn(ctx).
		If(s.intact(t)...).
		Then(clientv3.OpPut(s.key(t.Name), t.Owner, clientv3.WithLease(g.ID), clientv3.WithPrevKV())).
		Commit()
	if err != nil {
		// The new lease is left to expire: the put may have been applied.
		return driver.Tenure{}, false, err
	}
	if !resp.Succeeded {
		s.revokes.revoke(ctx, g.ID)
		return driver.Tenure{}, false, nil
	}
	if prev := resp.Responses[0].GetResponsePut().GetPrevKv(); prev != nil {
		s.revokes.revoke(ctx, clientv3.LeaseID(prev.Lease))
	}
	return held(t.Name, t.Owner, int64(t.Token), start, g.TTL), true, nil
}

// Release implements driver.Store.
//
// It deletes the key in a transaction that checks the tenure is intact
// (create revision = Token, value = owner), so a retried or stale Release
// can never delete a later tenure (etcd issue 22082), then revokes the
// tenure's etcd lease after the call returns. If the tenure is not intact
// it changes nothing and returns false.
//
// The transaction is sent once: etcd's client resends a transaction only
// when it was never sent or the server refused it unapplied (see the
// package documentation), so a reply lost in the network is an error, and
// never a false that a resend, finding the tenure already gone, would
// report.
func (s *store) Release(ctx context.Context, t driver.Tenure) (bool, error) {
	resp, err := s.client.Txn(ctx).
		If(s.intact(t)...).
		Then(clientv3.OpDelete(s.key(t.Name), clientv3.WithPrevKV())).
		Commit()
	if err != nil {
		return false, err
	}
	if !resp.Succeeded {
		return false, nil
	}
	for _, prev := range resp.Responses[0].GetResponseDeleteRange().GetPrevKvs() {
		s.revokes.revoke(ctx, clientv3.LeaseID(prev.Lease))
	}
	return true, nil
}
