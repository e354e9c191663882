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

// reenterRetries is how many times Acquire starts again when the
// tenure that owner already holds ends or moves to another etcd lease
// while Acquire re-enters it.
const reenterRetries = 3

// Acquire implements driver.Store.
//
// A tenure gets an etcd lease of ttl rounded up to whole seconds, taken
// from the Locker's pool of leases granted ahead of use, or, when the pool
// has none or a burst of Acquires is under way, granted now and shared
// with the Acquires that asked meanwhile (see grants). One transaction
// then creates the key on that lease if it does not exist, or else reads
// it; a keep-alive of a pooled lease goes out on the Locker's keep-alive
// stream alongside, so that the tenure lasts ttl from now, however long
// the lease waited in the pool.
//
// When owner already holds the name, Acquire re-enters the tenure (see
// reenter): it keeps the key's own etcd lease alive, and never moves the
// key in the transaction. A transaction that moved the key onto the new
// lease whenever owner held it would be dangerous if applied late (an
// Acquire whose caller timed out, sent to a member that was stopped and
// resumed): it would move the tenure that owner acquired since onto a
// lease that ends before the Deadline owner was given, and another owner
// could take the name while owner still holds it.
//
// When another owner holds the name, the unused lease goes back to the
// pool, and Acquire asks etcd how long the holder's lease has left. It
// remembers the name as held until then: an Acquire of it before that
// time reads the key first (a linearizable read, no raft write) and
// writes only if the name turns out to be free or owner's.
//
// If the transaction fails without an answer (a network error, ctx done),
// the lease is left to expire by itself: the transaction may have been
// applied, and the tenure it started must keep its lease.
func (s *store) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (driver.Tenure, error) {
	return s.acquireOrReenter(ctx, "Acquire", name, owner, ttl, func(start time.Time) (driver.Tenure, *mvccpb.KeyValue, error) {
		return s.acquire(ctx, name, owner, ttl, start)
	})
}

// acquireOrReenter runs try, one attempt of op (Acquire or
// AcquireOrWait), which returns the tenure it started or the holder, or
// mine, the key as read, when owner holds the name already; then it
// re-enters that tenure, and starts again when the tenure ended or moved
// meanwhile.
func (s *store) acquireOrReenter(ctx context.Context, op, name, owner string, ttl time.Duration, try func(start time.Time) (driver.Tenure, *mvccpb.KeyValue, error)) (driver.Tenure, error) {
	start := time.Now()
	for range reenterRetries {
		t, mine, err := try(start)
		if err != nil || mine == nil {
			return t, err
		}
		t, ok, err := s.reenter(ctx, name, owner, ttl, start, mine)
		if err != nil || ok {
			return t, err
		}
	}
	return driver.Tenure{}, fmt.Errorf("etcd: owner %q's tenure of %q kept ending or moving to another etcd lease while %s re-entered it (concurrent calls of the same owner)", owner, name, op)
}

// acquire is one attempt of Acquire: the tenure it granted, or the
// holder when another owner holds the name, or mine, the key as read,
// when owner holds it already (then the caller re-enters it, with no
// turn to write held).
func (s *store) acquire(ctx context.Context, name, owner string, ttl time.Duration, start time.Time) (t driver.Tenure, mine *mvccpb.KeyValue, err error) {
	if s.busy.likelyHeld(name, start) {
		kv, err := s.reads.get(ctx, s.key(name))
		if err != nil {
			return driver.Tenure{}, nil, err
		}
		if kv != nil && string(kv.Value) == owner {
			return driver.Tenure{}, kv, nil
		}
		if kv != nil {
			t, busy, err := s.holder(ctx, name, kv)
			if err != nil || busy {
				return t, nil, err
			}
		}
		s.busy.free(name)
	}
	// No turn to write (see write): the grants that Acquires share are
	// bounded per TTL (see grants), and their transactions by the writer.
	l, from, err := s.sharedGrant(ctx, ttl, start)
	if err != nil {
		return driver.Tenure{}, nil, err
	}
	key := s.key(name)
	for attempt := 0; ; attempt++ {
		resp, kaErr, err := s.commit(ctx, &l, key,
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
			[]clientv3.Op{clientv3.OpPut(key, owner, clientv3.WithLease(l.id))},
			[]clientv3.Op{clientv3.OpGet(key)})
		if isLeaseNotFound(err) && (l.pooled || l.group) && attempt == 0 {
			// The pooled lease ended before the transaction, or the
			// group's lease while the transaction waited for its turn
			// (it cannot have been applied without it): grant one now
			// and retry.
			if err = s.regrant(ctx, &l, ttl, start); err != nil {
				return driver.Tenure{}, nil, err
			}
			from = start
			continue
		}
		if err != nil {
			s.unanswered(l, name, owner)
			return driver.Tenure{}, nil, err
		}
		if resp.Succeeded {
			s.usedUp(l)
			if kaErr != nil {
				// The tenure is on the lease, but the lease may end
				// before ttl: a store failure. A retry re-enters it.
				return driver.Tenure{}, nil, kaErr
			}
			// A new key: its create revision is the transaction's revision.
			return s.began(ctx, l, name, owner, resp.Header.Revision, from), nil, nil
		}
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			s.unused(ctx, l)
			return driver.Tenure{}, nil, errors.New("etcd returned no holder for an existing key")
		}
		if string(kvs[0].Value) == owner {
			s.unused(ctx, l)
			return driver.Tenure{}, kvs[0], nil
		}
		t, busy, err := s.holder(ctx, name, kvs[0])
		if err != nil || busy || attempt+1 == busyRetries {
			s.unused(ctx, l)
			if err == nil && !busy {
				// Its holders keep ending as it is read: report the last
				// one, about to end.
				t = driver.Tenure{Name: name, Owner: string(kvs[0].Value), Token: uint64(kvs[0].CreateRevision), Remaining: time.Second}
			}
			return t, nil, err
		}
		// The holder's etcd lease ended after the transaction read it:
		// look again, with the lease already in hand.
	}
}

// reenter is Acquire of a name that owner holds already, mine being its
// key as read: the tenure keeps its Token and its etcd lease, which a
// keep-alive restarts, so that it lasts ttl from start, when the lease
// carries it alone (see soleOn). When ttl needs another (whole-second)
// TTL than that lease was granted, or the lease carries other tenures,
// the tenure moves onto a lease of its own, as a Renew to another ttl
// does. ok is
// false when the tenure ended or moved to another etcd lease meanwhile:
// Acquire starts again.
func (s *store) reenter(ctx context.Context, name, owner string, ttl time.Duration, start time.Time, mine *mvccpb.KeyValue) (t driver.Tenure, ok bool, err error) {
	t = driver.Tenure{Name: name, Owner: owner, Token: uint64(mine.CreateRevision)}
	if mine.Lease == int64(clientv3.NoLease) {
		return driver.Tenure{}, false, fmt.Errorf("key %q has no etcd lease: another program writes under the prefix %q", mine.Key, s.prefix)
	}
	id := clientv3.LeaseID(mine.Lease)
	if s.ledger.isUnsettled(t) {
		return s.move(ctx, t, ttl, start, id) // see move
	}
	if sole, err := s.soleOn(ctx, t, id); err != nil {
		return driver.Tenure{}, false, err
	} else if !sole {
		return s.move(ctx, t, ttl, start, id)
	}
	if !s.ledger.keepAliveStart(t, id) {
		return driver.Tenure{}, false, nil // released or moved meanwhile: start again
	}
	k := s.keepAliveOne(ctx, id)
	s.ledger.keepAliveDone(id, k.err == nil)
	switch {
	case k.err != nil:
		return driver.Tenure{}, false, k.err
	case k.ttl == 0:
		// The lease ended after the read: the tenure expired, was
		// released, or moved to another lease.
		return driver.Tenure{}, false, nil
	case k.ttl != s.grantedTTL(ttl):
		return s.move(ctx, t, ttl, start, id)
	}
	t = held(name, owner, mine.CreateRevision, start, k.ttl)
	s.ledger.kept(t, id, k.ttl)
	return t, true, nil
}

// holder returns the tenure kv, a key another owner holds, with the time
// its etcd lease has left, and remembers the name as held until then.
// busy is false if that lease ended meanwhile.
func (s *store) holder(ctx context.Context, name string, kv *mvccpb.KeyValue) (t driver.Tenure, busy bool, err error) {
	if kv.Lease == int64(clientv3.NoLease) {
		return driver.Tenure{}, false, fmt.Errorf("key %q has no etcd lease: another program writes under the prefix %q", kv.Key, s.prefix)
	}
	remaining, ok, err := s.remaining(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		return driver.Tenure{}, false, fmt.Errorf("read the holder's remaining time: %w", err)
	}
	if !ok {
		return driver.Tenure{}, false, nil
	}
	s.busy.heldUntil(name, time.Now().Add(remaining))
	return driver.Tenure{
		Name:      name,
		Owner:     string(kv.Value),
		Token:     uint64(kv.CreateRevision),
		Remaining: remaining,
	}, true, nil
}

// commit commits If(cmps).Then(then).Else(els) on key, a transaction that
// may put key on l, with a keep-alive of l alongside when l came from the
// pool (see txnKeeping). kaErr is the keep-alive's failure, or a lease
// that etcd no longer has: a tenure the transaction put on l is then not
// known to last its ttl. When both succeed, l lasts its TTL from a moment
// after the call began.
//
// The caller holds a turn to write (see write).
func (s *store) commit(ctx context.Context, l *tenureLease, key string, cmps []clientv3.Cmp, then, els []clientv3.Op) (resp *clientv3.TxnResponse, kaErr, err error) {
	wasPooled := l.pooled
	resp, _, kaErr, err = s.txnKeeping(ctx, key, cmps, then, els, []*tenureLease{l})
	switch {
	case kaErr != nil:
		kaErr = fmt.Errorf("keep-alive of etcd lease %x: %w", l.id, kaErr)
	case wasPooled && l.pooled:
		kaErr = fmt.Errorf("etcd lease %x: %w", l.id, errLeaseGone)
	}
	return resp, kaErr, err
}

// txnKeeping commits If(cmps).Then(then).Else(els) on key (shared with
// concurrent calls' transactions, see writer) and, at the same time, on
// the keep-alive stream, keeps alive each lease of leases that came from
// the pool and was not kept alive since (pooled; nil entries are
// skipped) and each lease of also; it waits for both. A pooled lease that
// etcd kept alive is pooled no more: it lasts its TTL from a moment after
// the call began. alsoTTLs are etcd's answers for also (0: it no longer
// has the lease); kaErr is the keep-alive call's failure, and then no
// lease changed.
func (s *store) txnKeeping(ctx context.Context, key string, cmps []clientv3.Cmp, then, els []clientv3.Op, leases []*tenureLease, also ...clientv3.LeaseID) (resp *clientv3.TxnResponse, alsoTTLs []int64, kaErr, err error) {
	var ids []clientv3.LeaseID
	var kept []*tenureLease
	for _, l := range leases {
		if l != nil && l.pooled {
			ids, kept = append(ids, l.id), append(kept, l)
		}
	}
	ids = append(ids, also...)
	if len(ids) == 0 {
		resp, err = s.writes.txn(ctx, key, cmps, then, els)
		return resp, nil, nil, err
	}
	sent := time.Now()
	ka := s.keeper.start(ctx, ids)
	resp, err = s.writes.txn(ctx, key, cmps, then, els)
	ttls, kaErr := ka.wait()
	if kaErr != nil {
		return resp, nil, kaErr, err
	}
	for i, l := range kept {
		if ttls[i] > 0 {
			l.pooled = false
			l.ttl = ttls[i]
			l.pooledLease.fresh, l.pooledLease.ttl = sent, ttls[i]
		}
	}
	return resp, ttls[len(kept):], nil, err
}

// errLeaseGone reports a lease that etcd no longer has when a call needed
// it alive.
var errLeaseGone = errors.New("the lease ended while in use (etcd no longer has it)")
