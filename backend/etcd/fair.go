package etcdlease

import (
	"context"
	"fmt"
	"time"

	"github.com/leasekit/lease/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The waiting line of a name (AcquireQueued) is a set of place keys, one
// per waiting owner, each on an etcd lease of its own of the place's TTL:
//
//	<prefix>\xffq<name>\xff<owner>   value: owner
//
// A place's create revision is its arrival: the owner whose place has the
// smallest create revision is first. A place expires with its etcd lease,
// which every AcquireQueued of its owner keeps alive, so a waiter that
// stops asking leaves the line within its place's TTL (whole seconds,
// rounded up). Names and owners are valid UTF-8, which never holds the
// byte 0xff: place keys cannot be tenure keys, the line of one name
// cannot hold another name's places, and List leaves them out.
//
// Each step is one transaction (with keep-alives on the Locker's stream
// alongside). A waiter whose place the Locker knows compares, in one
// transaction, that the name is free, that its place is still the one it
// joined with, and that every place in the line was created no earlier
// than its own (etcd compares every key of a range); when they hold, the
// same transaction puts the tenure and takes the place away. A waiter the
// Locker does not know yet acquires at once when the name is free and the
// line empty, and otherwise joins at the back in that transaction's else
// branch (a nested transaction).

// queueSep starts every place key after the prefix, and ends the name in
// it: a byte that valid UTF-8 never holds.
const queueSep = "\xff"

// linePrefix is the prefix of the place keys of name's line.
func (s *store) linePrefix(name string) string {
	return s.prefix + queueSep + "q" + name + queueSep
}

// placeKey is owner's place in name's line.
func (s *store) placeKey(name, owner string) string {
	return s.linePrefix(name) + owner
}

// queueAttempts bounds the transactions one AcquireQueued sends: a first
// one that finds the Locker's memory of the place stale, or joins the
// line, is followed by one that knows the place; a holder or first waiter
// that vanishes while it is read costs one more.
const queueAttempts = 4

// AcquireQueued implements driver.FairAcquirer (see the line's layout
// above). A waiter that already holds the name leaves the line and
// re-enters its tenure as Acquire does. When another owner holds the
// name, the answer is that tenure, with its remaining time (a second
// request, as for Acquire); when the name is free but another waiter is
// first, it is that waiter, with the time its place has left.
func (s *store) AcquireQueued(ctx context.Context, name, owner string, ttl, place time.Duration) (driver.Tenure, error) {
	return s.acquireOrReenter(ctx, "AcquireQueued", name, owner, ttl, func(start time.Time) (driver.Tenure, *mvccpb.KeyValue, error) {
		return s.acquireQueued(ctx, name, owner, ttl, place, start)
	})
}

// Dequeue implements driver.FairAcquirer: it deletes owner's place, if it
// has one, and revokes the place's etcd lease when the Locker knows it.
// The name's Watches are not woken by it (they watch the name's key): a
// waiter behind asks again within its refresh interval.
func (s *store) Dequeue(ctx context.Context, name, owner string) error {
	pk := s.placeKey(name, owner)
	p, known := s.places.get(pk)
	if _, err := s.writes.txn(ctx, s.key(name), nil, []clientv3.Op{clientv3.OpDelete(pk)}, nil); err != nil {
		return err
	}
	s.places.forget(pk)
	if known {
		s.revokes.revoke(ctx, p.lease)
	}
	return nil
}

// queueStep is what one transaction of AcquireQueued found.
type queueStep struct {
	acquired bool
	rev      int64 // the transaction's revision
	holder   *mvccpb.KeyValue
	first    *mvccpb.KeyValue // the first place in line, when the name is free
	place    placeRec         // owner's place, when it has one
	placed   bool
	// placeFresh says the place's etcd lease was kept alive (or granted)
	// alongside the transaction.
	placeFresh bool
}

// acquireQueued is one attempt of AcquireQueued: the tenure it started,
// or the holder or the waiter ahead, or mine, the key as read, when owner
// holds the name already (then the caller re-enters it).
func (s *store) acquireQueued(ctx context.Context, name, owner string, ttl, place time.Duration, start time.Time) (driver.Tenure, *mvccpb.KeyValue, error) {
	l, done, err := s.writeWithLease(ctx, ttl, start)
	if err != nil {
		return driver.Tenure{}, nil, err
	}
	defer done()
	key, pk := s.key(name), s.placeKey(name, owner)
	var wait driver.Tenure // the last waiting answer, for when attempts run out
	for range queueAttempts {
		st, err := s.queueStep(ctx, &l, key, pk, owner, place, start)
		if err != nil {
			s.unanswered(l, name, owner)
			return driver.Tenure{}, nil, err
		}
		if st.acquired {
			s.usedUp(l)
			return s.began(ctx, l, name, owner, st.rev, start), nil, nil
		}
		if st.holder != nil && string(st.holder.Value) == owner {
			s.unused(ctx, l)
			if st.placed {
				// A holder has no place in line: take it away.
				if err := s.Dequeue(ctx, name, owner); err != nil {
					return driver.Tenure{}, nil, fmt.Errorf("leave the line of a name owner holds: %w", err)
				}
			}
			return driver.Tenure{}, st.holder, nil
		}
		if !st.placed {
			continue // the place expired: join again
		}
		if !st.placeFresh {
			// The place was found, not kept alive with this call: its
			// expiry moves to now+place only by a keep-alive.
			if k := s.keepAliveOne(ctx, st.place.lease); k.err != nil {
				s.unused(ctx, l)
				return driver.Tenure{}, nil, fmt.Errorf("keep the place in line alive: %w", k.err)
			} else if k.ttl == 0 {
				s.places.forget(pk)
				continue
			}
		}
		if st.holder != nil {
			t, busy, err := s.holder(ctx, name, st.holder)
			if err != nil || busy {
				s.unused(ctx, l)
				return t, nil, err
			}
			continue // the holder's lease ended as it was read
		}
		if st.first == nil || string(st.first.Key) == pk {
			// Free, and owner first in line, by a stale memory of its place:
			// the next transaction knows it.
			continue
		}
		left, ok, err := s.remaining(ctx, clientv3.LeaseID(st.first.Lease))
		if err != nil {
			s.unused(ctx, l)
			return driver.Tenure{}, nil, fmt.Errorf("read the time the first waiter's place has left: %w", err)
		}
		wait = driver.Tenure{Name: name, Owner: string(st.first.Value), Remaining: left}
		if ok {
			s.unused(ctx, l)
			return wait, nil, nil
		}
	}
	s.unused(ctx, l)
	if wait.Owner != "" {
		// The waiters ahead keep leaving as they are read: report the
		// last one, about to go.
		wait.Remaining = time.Second
		return wait, nil, nil
	}
	return driver.Tenure{}, nil, fmt.Errorf("etcd: the line of %q kept changing while AcquireQueued of owner %q looked at it (%d transactions)", name, owner, queueAttempts)
}

// queueStep sends one transaction of AcquireQueued: with owner's known
// place, the turn's check; without it, acquire-if-free-and-line-empty, or
// else join the line. l is the tenure's lease (replaced when a pooled one
// turns out to have ended).
func (s *store) queueStep(ctx context.Context, l *tenureLease, key, pk, owner string, place time.Duration, start time.Time) (queueStep, error) {
	line := s.linePrefix(key[len(s.prefix):])
	firstInLine := clientv3.OpGet(line, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	p, known := s.places.get(pk)
	var pl *tenureLease // a lease for a new place
	if !known {
		nl, err := s.leaseFor(ctx, place, start)
		if err != nil {
			return queueStep{}, err
		}
		pl = &nl
	}
	for attempt := 0; ; attempt++ {
		var cmps []clientv3.Cmp
		var then, els []clientv3.Op
		var also []clientv3.LeaseID // the known place's lease, kept alive alongside
		if known {
			cmps = []clientv3.Cmp{
				clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
				clientv3.Compare(clientv3.CreateRevision(pk), "=", p.rev),
				// Every place in line arrived no earlier than owner's.
				clientv3.Compare(clientv3.CreateRevision(line), ">", p.rev-1).WithPrefix(),
			}
			then = []clientv3.Op{clientv3.OpPut(key, owner, clientv3.WithLease(l.id)), clientv3.OpDelete(pk)}
			els = []clientv3.Op{clientv3.OpGet(key), clientv3.OpGet(pk), firstInLine}
			also = []clientv3.LeaseID{p.lease}
		} else {
			cmps = []clientv3.Cmp{
				clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
				// The line is empty (a range compare with no key compares
				// a key that does not exist).
				clientv3.Compare(clientv3.CreateRevision(line), "=", 0).WithPrefix(),
			}
			then = []clientv3.Op{clientv3.OpPut(key, owner, clientv3.WithLease(l.id))}
			join := clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(pk), "=", 0)},
				[]clientv3.Op{clientv3.OpPut(pk, owner, clientv3.WithLease(pl.id))},
				[]clientv3.Op{clientv3.OpGet(pk)})
			els = []clientv3.Op{clientv3.OpGet(key), join, firstInLine}
		}
		resp, alsoTTLs, kaErr, err := s.txnKeeping(ctx, key, cmps, then, els, []*tenureLease{l, pl}, also...)
		if isLeaseNotFound(err) && attempt == 0 {
			// A pooled lease ended before the transaction (which cannot
			// have been applied then): grant fresh ones and try again.
			if l.pooled {
				if err = s.regrant(ctx, l, time.Duration(l.sec)*time.Second, start); err != nil {
					return queueStep{}, err
				}
			}
			if pl != nil && pl.pooled {
				s.usedUp(*pl)
				if *pl, err = s.grantFor(ctx, place, start); err != nil {
					return queueStep{}, err
				}
			}
			continue
		}
		if err != nil {
			if pl != nil {
				// The place may have been put: leave its lease to expire.
				s.usedUp(*pl)
			}
			return queueStep{}, err
		}
		st := queueStep{rev: resp.Header.Revision}
		if resp.Succeeded {
			st.acquired = true
			switch {
			case kaErr != nil:
				err = fmt.Errorf("keep-alive of etcd lease %x: %w", l.id, kaErr)
			case l.pooled:
				err = fmt.Errorf("etcd lease %x: %w", l.id, errLeaseGone)
			}
			if known {
				s.places.forget(pk)
				s.revokes.revoke(ctx, p.lease)
			} else {
				s.unused(ctx, *pl)
			}
			// The tenure is on the lease, but the lease may end before
			// ttl when its keep-alive failed: a store failure. A retry
			// re-enters it.
			return st, err
		}
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			st.holder = kvs[0]
		}
		if kvs := resp.Responses[2].GetResponseRange().GetKvs(); len(kvs) > 0 {
			st.first = kvs[0]
		}
		if known {
			if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
				st.place = placeRec{rev: kvs[0].CreateRevision, lease: clientv3.LeaseID(kvs[0].Lease)}
				st.placed = true
				st.placeFresh = st.place.lease == p.lease && kaErr == nil && alsoTTLs[0] > 0
			}
		} else {
			joined := resp.Responses[1].GetResponseTxn()
			switch {
			case joined == nil:
				return queueStep{}, errShortAnswer
			case joined.Succeeded:
				st.place = placeRec{rev: resp.Header.Revision, lease: pl.id}
				st.placed = true
				st.placeFresh = !pl.pooled // granted now, or kept alive alongside
				if pl.fromPool {
					s.pool.usedUp(pl.sec)
				}
			default:
				if kvs := joined.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
					st.place = placeRec{rev: kvs[0].CreateRevision, lease: clientv3.LeaseID(kvs[0].Lease)}
					st.placed = true
				}
				s.unused(ctx, *pl)
			}
		}
		if st.placed {
			s.places.put(pk, st.place)
		} else {
			s.places.forget(pk)
		}
		return st, nil
	}
}

// placeRec is what a Locker remembers of a place in line: its create
// revision (its arrival) and its etcd lease.
type placeRec struct {
	rev   int64
	lease clientv3.LeaseID
}

// places remembers the places in line of a Locker's waiters, so that a
// waiter's next step is the one transaction that compares its arrival.
// Forgetting one is harmless: the next step reads the place again. It
// holds at most maxPlaces.
type places = bounded[string, placeRec]

// maxPlaces bounds the places a Locker remembers.
const maxPlaces = 4096
