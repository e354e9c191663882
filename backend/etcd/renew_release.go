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

// intact is the comparison that identifies the tenure t: its key exists
// with t's create revision (no other tenure has it) and holds t's owner.
func (s *store) intact(t driver.Tenure) []clientv3.Cmp {
	key := s.key(t.Name)
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(key), "=", int64(t.Token)),
		clientv3.Compare(clientv3.Value(key), "=", t.Owner),
	}
}

// isIntact reports whether kv, as read, is the key of the tenure t.
func isIntact(kv *mvccpb.KeyValue, t driver.Tenure) bool {
	return kv != nil && kv.CreateRevision == int64(t.Token) && string(kv.Value) == t.Owner
}

// renewRetries is how many keep-alives Renew tries when concurrent calls
// of the same owner keep moving the tenure onto other etcd leases, before
// it moves the tenure onto a new lease itself.
const renewRetries = 3

// Renew implements driver.Store.
//
// A Renew with the ttl the tenure's etcd lease was granted for keeps that
// lease alive, which writes nothing to etcd's log; etcd refuses to keep an
// expired lease alive, so an expired tenure is never revived. When the
// Locker knows the tenure's lease (it acquired or renewed the tenure
// before), the keep-alive goes out on the keep-alive stream at the same
// time as a read of the key that checks the tenure is intact (create
// revision = Token, value = owner) and still on that lease: one round
// trip. The reads of concurrent Renews share read-only transactions (see
// reader). Otherwise a read-only transaction that checks the tenure is
// intact first finds the lease, then the keep-alive follows: two.
//
// Renew keeps the lease alive only when it carries this tenure alone (see
// soleOn): a lease this Locker put it on alone, or a group whose last
// tenure it is. A tenure of a group with others, or on a lease that
// carries other keys, moves onto a lease of its own instead, as for
// another ttl. Keeping the lease alive before the check is then safe
// because the ledger lets a Release recycle it for the next tenure only
// when no keep-alive of it for this one is under way, and lets none go
// out once the tenure has left it (see ledger.keepAliveStart): if the
// check fails, the keep-alive restarted a lease that holds nothing, or
// that is about to be revoked.
//
// A keep-alive restarts a lease with the TTL it was granted; when ttl
// needs another (whole-second) TTL, Renew takes a lease of that TTL from
// the pool and moves the key onto it in a transaction that checks the
// tenure is intact, then revokes the old lease.
//
// If the tenure is not intact it returns ok false and changes nothing.
func (s *store) Renew(ctx context.Context, t driver.Tenure, ttl time.Duration) (driver.Tenure, bool, error) {
	start := time.Now()
	want := s.grantedTTL(ttl)
	l, ok := s.ledger.lease(t)
	if s.ledger.isUnsettled(t) {
		// A move that failed without an answer may still be applied: a
		// move onto a fresh lease makes it fail for good (see move).
		return s.move(ctx, t, ttl, start, l.id)
	}
	if !ok {
		return s.renewSlow(ctx, t, ttl, start)
	}
	if l.ttl != want {
		return s.move(ctx, t, ttl, start, l.id)
	}
	if sole, err := s.soleOn(ctx, t, l.id); err != nil {
		return driver.Tenure{}, false, err
	} else if !sole {
		return s.move(ctx, t, ttl, start, l.id)
	}
	if !s.ledger.keepAliveStart(t, l.id) {
		// It left the lease meanwhile: the move's checks tell where it is.
		return s.move(ctx, t, ttl, start, l.id)
	}
	ka := s.keeper.start(ctx, []clientv3.LeaseID{l.id})
	kv, err := s.reads.get(ctx, s.key(t.Name))
	k := result(ka.wait())
	s.ledger.keepAliveDone(l.id, k.err == nil)
	if err != nil {
		return driver.Tenure{}, false, err
	}
	switch judgeRenewal(t, l.id, kv, k.ttl, k.err) {
	case renewalLost:
		s.dispose(ctx, s.ledger.gone(t)...)
		return driver.Tenure{}, false, nil
	case renewalFailed:
		return driver.Tenure{}, false, k.err
	case renewalLookAgain:
		return s.renewSlow(ctx, t, ttl, start)
	}
	renewed := held(t.Name, t.Owner, int64(t.Token), start, k.ttl)
	s.ledger.kept(renewed, l.id, k.ttl)
	return renewed, true, nil
}

// renewal is what a keep-alive of a tenure's etcd lease and a read of its
// key, sent together, prove about the tenure.
type renewal int

const (
	// renewalDone: the keep-alive renewed the tenure.
	renewalDone renewal = iota
	// renewalLost: the tenure is not intact (ended or taken over).
	renewalLost
	// renewalFailed: the keep-alive failed; the tenure may or may not
	// have been renewed.
	renewalFailed
	// renewalLookAgain: the tenure is intact, but not (or no longer) on
	// the lease kept alive: a call of the same owner moved it, or the
	// lease ended after the read.
	renewalLookAgain
)

// judgeRenewal is the one place that decides what a keep-alive of the
// etcd lease id, answered with kaTTL (0: etcd has no such lease) or kaErr,
// and a linearizable read of t's key that returned kv, both sent for the
// tenure t in the same round trip, prove (see "What a renewal proves, and
// why it reads" in the package documentation). The keep-alive alone
// proves nothing about the key; the read alone renews nothing.
func judgeRenewal(t driver.Tenure, id clientv3.LeaseID, kv *mvccpb.KeyValue, kaTTL int64, kaErr error) renewal {
	switch {
	case !isIntact(kv, t):
		return renewalLost
	case kv.Lease != int64(id):
		// Intact, on another lease: a Locker of the same owner moved it.
		return renewalLookAgain
	case kaErr != nil:
		return renewalFailed
	case kaTTL == 0:
		// The lease ended after the read: the tenure expired, was
		// released, or moved onto another lease. Look again.
		return renewalLookAgain
	}
	return renewalDone
}

// kaResult is the answer to one keep-alive: the lease's granted TTL, 0
// when etcd no longer has the lease, or err.
type kaResult struct {
	ttl int64
	err error
}

func (s *store) keepAliveOne(ctx context.Context, id clientv3.LeaseID) kaResult {
	return result(s.keeper.keepAlive(ctx, []clientv3.LeaseID{id}))
}

// result is the kaResult of a keep-alive of one lease.
func result(ttls []int64, err error) kaResult {
	if err != nil {
		return kaResult{err: fmt.Errorf("keep-alive: %w", err)}
	}
	return kaResult{ttl: ttls[0]}
}

// renewSlow is Renew of a tenure whose etcd lease the Locker does not
// know: it reads the lease in a read-only transaction that checks the
// tenure is intact, then keeps that lease alive.
func (s *store) renewSlow(ctx context.Context, t driver.Tenure, ttl time.Duration, start time.Time) (driver.Tenure, bool, error) {
	for range renewRetries {
		kv, err := s.readIntact(ctx, t)
		if err != nil {
			return driver.Tenure{}, false, err
		}
		if kv == nil {
			s.dispose(ctx, s.ledger.gone(t)...)
			return driver.Tenure{}, false, nil
		}
		id := clientv3.LeaseID(kv.Lease)
		if sole, err := s.soleOn(ctx, t, id); err != nil {
			return driver.Tenure{}, false, err
		} else if !sole {
			return s.move(ctx, t, ttl, start, id)
		}
		if !s.ledger.keepAliveStart(t, id) {
			// It left the lease meanwhile: the move's checks tell where
			// it is.
			return s.move(ctx, t, ttl, start, id)
		}
		k := s.keepAliveOne(ctx, id)
		s.ledger.keepAliveDone(id, k.err == nil)
		switch judgeRenewal(t, id, kv, k.ttl, k.err) {
		case renewalFailed:
			return driver.Tenure{}, false, k.err
		case renewalLookAgain:
			// The etcd lease ended after the read: it expired (etcd
			// answers once the key is deleted), the tenure was released,
			// or a concurrent re-entrant Acquire or Renew moved the
			// tenure onto a new lease. Look again.
			continue
		}
		if k.ttl != s.grantedTTL(ttl) {
			return s.move(ctx, t, ttl, start, id)
		}
		renewed := held(t.Name, t.Owner, int64(t.Token), start, k.ttl)
		s.ledger.kept(renewed, id, k.ttl)
		return renewed, true, nil
	}
	// Concurrent calls kept moving the tenure between etcd leases: settle
	// it with owner-checked transactions.
	return s.move(ctx, t, ttl, start, clientv3.NoLease)
}

// readIntact returns the key of the tenure t as read, with its etcd
// lease, or nil if the tenure is not intact. The transaction only reads.
func (s *store) readIntact(ctx context.Context, t driver.Tenure) (*mvccpb.KeyValue, error) {
	r, err := s.client.Txn(ctx).If(s.intact(t)...).Then(clientv3.OpGet(s.key(t.Name))).Commit()
	if err != nil {
		return nil, err
	}
	if !r.Succeeded {
		return nil, nil
	}
	kvs := r.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil, errors.New("etcd returned no value for an existing key")
	}
	return kvs[0], nil
}

// moveRetries is how many times move tries again when the tenure turns
// out to be on another etcd lease than the one it was read on.
const moveRetries = 3

// move renews the tenure t for a ttl its etcd lease was not granted: it
// takes a lease of that ttl (from the pool, kept alive alongside, or
// granted now) and, in one transaction that checks the tenure is intact
// and still on from, its etcd lease as last read, moves the key onto it,
// then revokes from.
//
// The check of from makes a move that etcd applies late (its caller gave
// up, its request waited in a stopped member) fail once the tenure has
// been moved or renewed onto another lease since: it would otherwise move
// the tenure back onto a lease kept alive only when the late move was
// sent, which may end before the Deadline a later call gave the holder.
// When the tenure is intact on another lease than from (a call of the
// same owner moved it, or from was not known: clientv3.NoLease), move
// tries again with that lease.
//
// A move that fails without an answer may still be applied, and it would
// then move the tenure onto a lease kept alive only when it was sent,
// while the holder goes on renewing the old one: the tenure is marked
// unsettled, and its next renewal is a move too, whatever the ttl. Every
// move compares the lease the tenure is on, and a successful one puts it
// on a lease that no earlier move named, so once one succeeds, no move
// sent before it can ever be applied.
func (s *store) move(ctx context.Context, t driver.Tenure, ttl time.Duration, start time.Time, from clientv3.LeaseID) (driver.Tenure, bool, error) {
	done, err := s.write(ctx)
	if err != nil {
		return driver.Tenure{}, false, err
	}
	defer done()
	l, err := s.leaseFor(ctx, ttl, start)
	if err != nil {
		return driver.Tenure{}, false, err
	}
	s.lend(&l)
	key := s.key(t.Name)
	for attempt := 0; ; attempt++ {
		resp, kaErr, err := s.commit(ctx, &l, key,
			append(s.intact(t), clientv3.Compare(clientv3.LeaseValue(key), "=", int64(from))),
			[]clientv3.Op{clientv3.OpPut(key, t.Owner, clientv3.WithLease(l.id), clientv3.WithPrevKV())},
			[]clientv3.Op{clientv3.OpGet(key)})
		if err != nil {
			// The new lease is left to expire: the put may have been
			// applied, or may be later.
			s.unanswered(l, t.Name, t.Owner)
			s.ledger.unsettle(t)
			return driver.Tenure{}, false, err
		}
		if !resp.Succeeded {
			kvs := resp.Responses[0].GetResponseRange().GetKvs()
			if len(kvs) == 1 && isIntact(kvs[0], t) && kvs[0].Lease != int64(from) && attempt+1 < moveRetries {
				from = clientv3.LeaseID(kvs[0].Lease)
				continue
			}
			s.unused(ctx, l)
			if len(kvs) == 1 && isIntact(kvs[0], t) {
				return driver.Tenure{}, false, fmt.Errorf("etcd: the tenure of %q kept moving to other etcd leases while it was renewed to another ttl (concurrent calls of owner %q)", t.Name, t.Owner)
			}
			s.dispose(ctx, s.ledger.gone(t)...)
			return driver.Tenure{}, false, nil
		}
		s.usedUp(l)
		// The tenure left from (the lease the comparison found it on):
		// the ledger says whether that lease may be revoked or recycled.
		// A failed keep-alive leaves the tenure on l, which may end
		// before ttl: a store failure, and a retry moves it again.
		renewed := held(t.Name, t.Owner, int64(t.Token), start, l.ttl)
		s.dispose(ctx, s.ledger.began(l.id, renewed, l.ttl, from)...)
		if kaErr != nil {
			return driver.Tenure{}, false, kaErr
		}
		return renewed, true, nil
	}
}

// Release implements driver.Store.
//
// It deletes the key in a transaction that checks the tenure is intact
// (create revision = Token, value = owner), so a retried or stale Release
// can never delete a later tenure (etcd issue 22082); then the tenure's
// etcd lease goes back to the pool or is revoked after the call returns,
// as the ledger allows. If the tenure is not intact it changes nothing and
// returns false. The transaction also reads the first mark of the name's
// line: when there is one, Release names its waiter to the Lockers that
// watch the name (nameChoice, in turns.go).
//
// The transaction is sent once (it may share a transaction with
// concurrent calls', see writer): etcd's client resends a transaction
// only when it was never sent or the server refused it unapplied (see the
// package documentation), so a reply lost in the network is an error, and
// never a false that a resend, finding the tenure already gone, would
// report.
func (s *store) Release(ctx context.Context, t driver.Tenure) (bool, error) {
	key := s.key(t.Name)
	resp, err := s.writes.txn(ctx, key, s.intact(t), []clientv3.Op{clientv3.OpDelete(key, clientv3.WithPrevKV()), s.firstMark(t.Name)}, nil)
	if err != nil {
		// It may have been applied or not: the ledger still counts the
		// tenure on its lease, which so stays unrevoked.
		return false, err
	}
	if !resp.Succeeded {
		s.dispose(ctx, s.ledger.gone(t)...)
		return false, nil
	}
	s.busy.free(t.Name)
	s.nameChoice(ctx, t.Name, resp)
	for _, prev := range resp.Responses[0].GetResponseDeleteRange().GetPrevKvs() {
		// The key was the tenure's: back to the pool for the next
		// Acquire (no LeaseRevoke now, no LeaseGrant then) or revoked,
		// as the ledger allows; a lease that is not this Locker's
		// expires by itself.
		s.dispose(ctx, s.ledger.removed(t, clientv3.LeaseID(prev.Lease), true)...)
	}
	return true, nil
}

// soleOn reports whether a keep-alive of the etcd lease id renews the
// tenure t and no other: a lease this Locker put t on alone, or a group
// of this Locker's that carries only t. A lease this Locker does not know
// may be another Locker's group: LeaseTimeToLive lists its keys (one
// more round trip, for a tenure renewed by another Locker than the one
// that acquired it). When it is not, the caller moves t onto a lease of
// its own.
func (s *store) soleOn(ctx context.Context, t driver.Tenure, id clientv3.LeaseID) (bool, error) {
	if alone, own := s.ledger.alone(t, id); own {
		return alone, nil
	}
	r, err := s.client.TimeToLive(ctx, id, clientv3.WithAttachedKeys())
	if err != nil {
		return false, fmt.Errorf("read the keys of etcd lease %x: %w", id, err)
	}
	key := s.key(t.Name)
	for _, k := range r.Keys {
		if string(k) != key {
			return false, nil
		}
	}
	return true, nil
}
