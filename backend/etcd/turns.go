package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	_ driver.TurnWatcher = (*store)(nil)
)

// Turns (lease.TurnWaiter). A waiting Locker's mark on a name is a key
//
//	<prefix>\xffw<name>\xff<waiter>\xff<seq>   value: empty
//
// on an etcd lease of the mark's own (MarkLife, rounded up to whole
// seconds), which each AcquireOrWait of the waiter keeps alive alongside
// its transaction: a mark lapses MarkLife after the last AcquireOrWait
// that renewed it, by etcd's clock, when etcd deletes it with its lease.
// Its create revision is its place in line. Like the places of fair.go,
// marks start with the byte 0xff, which no name holds, so List and the
// tenure keys never see them; seq (16 hex digits, drawn from a counter of
// the Locker's) changes whenever a mark goes to the back of the line, so
// that the new key gets a new create revision in the transaction that
// deletes the old one.
//
// AcquireOrWait is one transaction, Acquire's with more in its branches:
//
//	if the name's key does not exist:
//	    put it; delete the waiter's mark (Keep: put a new one, delete the rest)
//	else: read the key, and
//	    if its value is owner (re-entry): as above
//	    else if the waiter has no mark: put one
//	    else: read the mark
//
// Releases need no change: every Locker watching a name for turns also
// watches its marks (see watch.go) and, when the name's key is deleted
// (a Release, a ForceRelease, or an expiry) at revision R, picks the mark
// created first before R; its waiter's turn Watches wake, and no others.
// With no mark, every turn Watch wakes.

// marksPrefix is the prefix of the marks of name.
func (s *store) marksPrefix(name string) string {
	return s.prefix + queueSep + "w" + name + queueSep
}

// markBase is the prefix of waiter's mark on name: the mark is markBase
// followed by its seq.
func (s *store) markBase(name, waiter string) string {
	return s.marksPrefix(name) + waiter + queueSep
}

// newMarkKey is a mark key under base that no mark of this Locker has had.
func (s *store) newMarkKey(base string) string {
	return fmt.Sprintf("%s%016x", base, s.markSeq.Add(1))
}

// WatchTurn implements driver.TurnWatcher. It is Watch (sharing the
// name's etcd watches with the Locker's other Watches of it), with a
// choice: a deletion of the name's key wakes the turn Watch only when
// the oldest mark then is waiter's, or there is no mark.
func (s *store) WatchTurn(ctx context.Context, name, waiter string) (lease.Watch, error) {
	return s.watch(ctx, name, true, waiter)
}

// StopWaiting implements driver.TurnWatcher: one transaction that deletes
// waiter's mark on name. The mark's etcd lease, kept for the waiter's
// next mark, expires by itself.
func (s *store) StopWaiting(ctx context.Context, name, waiter string) error {
	base := s.markBase(name, waiter)
	_, err := s.writes.txn(ctx, s.key(name), nil, []clientv3.Op{clientv3.OpDelete(base, clientv3.WithPrefix())}, nil)
	if err != nil {
		return err
	}
	// The mark is gone; its lease stays for the next one.
	s.marks.change(markID{name, waiter}, func(r markRec) markRec { r.key = ""; return r })
	return nil
}

// AcquireOrWait implements driver.TurnWatcher: Acquire, whose
// transaction also places, keeps or takes away m.Waiter's mark (see
// above). A busy answer keeps the mark's etcd lease alive while it reads
// the holder's remaining time, so that the mark lasts m.Life from now;
// with Keep, the keep-alive goes alongside the transaction, which may
// put the mark anew; an acquisition without Keep sends none. When the
// Locker knows the name is held and knows its mark, it reads the key
// first, as Acquire does, and keeps the mark's lease alive meanwhile: a
// busy answer that writes nothing.
func (s *store) AcquireOrWait(ctx context.Context, name, owner string, ttl time.Duration, m driver.Mark) (driver.Tenure, error) {
	return s.acquireOrReenter(ctx, "AcquireOrWait", name, owner, ttl, func(start time.Time) (driver.Tenure, *mvccpb.KeyValue, error) {
		return s.acquireOrWait(ctx, name, owner, ttl, m, start)
	})
}

// acquireOrWait is one attempt of AcquireOrWait: as acquire, with the
// mark.
func (s *store) acquireOrWait(ctx context.Context, name, owner string, ttl time.Duration, m driver.Mark, start time.Time) (driver.Tenure, *mvccpb.KeyValue, error) {
	id := markID{name, m.Waiter}
	key, base := s.key(name), s.markBase(name, m.Waiter)
	if s.busy.likelyHeld(name, start) {
		if rec, ok := s.marks.get(id); ok && rec.key != "" && rec.alive(start) {
			t, busy, err := s.waitKnown(ctx, name, owner, id, rec, start)
			if err != nil || busy {
				return t, nil, err
			}
		}
	}
	l, from, err := s.sharedGrant(ctx, ttl, start)
	if err != nil {
		return driver.Tenure{}, nil, err
	}
	ml, known, err := s.markLease(ctx, id, m.Life, start)
	if err != nil {
		s.unused(ctx, l)
		return driver.Tenure{}, nil, err
	}
	// dropMark disposes of ml, which carries no mark: a lease the Locker
	// kept for marks is kept, another goes back.
	dropMark := func() {
		switch {
		case known:
			s.marks.put(id, markRec{lease: ml.pooledLease})
		case ml.pooled:
			// Untouched since the pool gave it: back as it was.
			s.marks.forget(id)
			s.pool.give(ml.sec, ml.pooledLease)
		default:
			s.marks.forget(id)
			s.unused(ctx, ml)
		}
	}
	for attempt := 0; ; attempt++ {
		mk := s.newMarkKey(base)
		var took []clientv3.Op // when the caller holds the name after
		if m.Keep {
			took = []clientv3.Op{
				clientv3.OpPut(mk, "", clientv3.WithLease(ml.id)),
				clientv3.OpDelete(base, clientv3.WithRange(mk)),
				clientv3.OpDelete(mk+"\x00", clientv3.WithRange(clientv3.GetPrefixRangeEnd(base))),
			}
		} else {
			took = []clientv3.Op{clientv3.OpDelete(base, clientv3.WithPrefix())}
		}
		wait := clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(base), "=", 0).WithPrefix()},
			[]clientv3.Op{clientv3.OpPut(mk, "", clientv3.WithLease(ml.id))},
			[]clientv3.Op{clientv3.OpGet(base, clientv3.WithPrefix(), clientv3.WithKeysOnly())})
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
		then := append([]clientv3.Op{clientv3.OpPut(key, owner, clientv3.WithLease(l.id))}, took...)
		els := []clientv3.Op{
			clientv3.OpGet(key),
			clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", owner)}, took, []clientv3.Op{wait}),
		}
		// The mark's lease is kept alive alongside only when the
		// transaction may leave the mark on it after acquiring (Keep);
		// a busy answer keeps it alive while the holder's time is read,
		// and an acquisition without Keep needs it no more.
		leases := []*tenureLease{&l}
		var also []clientv3.LeaseID
		switch {
		case !m.Keep:
		case known:
			also = []clientv3.LeaseID{ml.id}
		default:
			leases = append(leases, &ml)
		}
		wasPooled := l.pooled
		resp, alsoTTLs, kaErr, err := s.txnKeeping(ctx, key, cmps, then, els, leases, also...)
		if isLeaseNotFound(err) && attempt == 0 {
			// A pooled lease, the group's, or the lease kept for marks
			// ended before the transaction (which cannot have been
			// applied then): grant what may have ended and retry.
			if l.pooled || l.group {
				if err = s.regrant(ctx, &l, ttl, start); err != nil {
					if !known {
						s.usedUp(ml)
					}
					return driver.Tenure{}, nil, err
				}
				from = start
			}
			if !known {
				s.usedUp(ml)
			}
			s.marks.forget(id)
			if ml, err = s.grantFor(ctx, m.Life, start); err != nil {
				s.unused(ctx, l)
				return driver.Tenure{}, nil, err
			}
			known = false
			continue
		}
		if err != nil {
			s.unanswered(l, name, owner)
			// A mark may have been put on ml: leave it to expire, and
			// forget it, so that the next attempt reads what is there.
			if !known {
				s.usedUp(ml)
			}
			s.marks.forget(id)
			return driver.Tenure{}, nil, err
		}
		switch {
		case kaErr != nil:
			kaErr = fmt.Errorf("keep-alive of etcd leases %x, %x: %w", l.id, ml.id, kaErr)
		case wasPooled && l.pooled:
			kaErr = fmt.Errorf("etcd lease %x: %w", l.id, errLeaseGone)
		}
		if known && m.Keep && kaErr == nil {
			if len(alsoTTLs) > 0 && alsoTTLs[0] > 0 {
				ml.pooledLease.fresh, ml.pooledLease.ttl = start, alsoTTLs[0]
			} else {
				// The lease kept for marks has ended: so has any mark on it.
				known = false
				s.marks.forget(id)
			}
		}
		// kept records the mark that took ops left (Keep), or its absence.
		kept := func() {
			if !m.Keep {
				dropMark()
				return
			}
			s.usedUp(ml)
			s.marks.put(id, markRec{lease: ml.pooledLease, key: mk})
		}
		if resp.Succeeded {
			s.usedUp(l)
			kept()
			if kaErr != nil {
				// The tenure is on the lease, but the lease may end
				// before ttl: a store failure. A retry re-enters it.
				return driver.Tenure{}, nil, kaErr
			}
			return s.began(ctx, l, name, owner, resp.Header.Revision, from), nil, nil
		}
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		owned := resp.Responses[1].GetResponseTxn()
		if len(kvs) == 0 || owned == nil {
			s.unused(ctx, l)
			dropMark()
			return driver.Tenure{}, nil, errors.New("etcd returned no holder for an existing key")
		}
		if owned.Succeeded {
			// owner holds the name: the mark went as for an acquisition,
			// and the caller re-enters the tenure.
			s.unused(ctx, l)
			kept()
			return driver.Tenure{}, kvs[0], nil
		}
		placed := owned.Responses[0].GetResponseTxn()
		if placed == nil {
			s.unused(ctx, l)
			dropMark()
			return driver.Tenure{}, nil, errShortAnswer
		}
		var ka *kaCall // the mark's keep-alive, alongside the holder's read
		var markKey string
		if placed.Succeeded {
			s.usedUp(ml)
			markKey = mk
		} else if found := placed.Responses[0].GetResponseRange().GetKvs(); len(found) > 0 && clientv3.LeaseID(found[0].Lease) == ml.id {
			markKey = string(found[0].Key)
		} else if len(found) > 0 {
			s.adopt(ctx, id, found[0], &ml, &known)
		} else {
			dropMark()
		}
		sent := time.Now()
		if markKey != "" {
			s.marks.put(id, markRec{lease: ml.pooledLease, key: markKey})
			ml.pooled, known = false, true
			ka = s.keeper.start(ctx, []clientv3.LeaseID{ml.id})
		}
		if kaErr != nil {
			s.unused(ctx, l)
			if ka != nil {
				_, _ = ka.wait()
			}
			return driver.Tenure{}, nil, kaErr
		}
		t, busy, err := s.holder(ctx, name, kvs[0])
		if ka != nil {
			if ttls, kerr := ka.wait(); kerr == nil && ttls[0] > 0 {
				ml.pooledLease.fresh, ml.pooledLease.ttl = sent, ttls[0]
				s.marks.put(id, markRec{lease: ml.pooledLease, key: markKey})
			} else if kerr == nil {
				// The mark's lease ended: so did the mark.
				s.marks.forget(id)
				known = false
			}
			// A keep-alive that failed leaves the mark its lease's time;
			// the waiter's next call keeps it alive.
		}
		if err != nil || busy || attempt+1 == busyRetries {
			s.unused(ctx, l)
			if err == nil && !busy {
				t = driver.Tenure{Name: name, Owner: string(kvs[0].Value), Token: uint64(kvs[0].CreateRevision), Remaining: time.Second}
			}
			return t, nil, err
		}
		// The holder's etcd lease ended after the transaction read it:
		// look again, with the lease already in hand.
	}
}

// adopt records found, waiter's mark as the transaction found it. When it
// is on another etcd lease than ml (the Locker had forgotten its mark),
// ml goes back and the mark's own lease is kept alive now, so that the
// mark lasts its life from this call.
func (s *store) adopt(ctx context.Context, id markID, found *mvccpb.KeyValue, ml *tenureLease, known *bool) {
	if clientv3.LeaseID(found.Lease) == ml.id {
		s.marks.put(id, markRec{lease: ml.pooledLease, key: string(found.Key)})
		return
	}
	switch {
	case *known:
	case ml.pooled:
		s.pool.give(ml.sec, ml.pooledLease) // untouched since the pool gave it
	default:
		s.unused(ctx, *ml)
	}
	*known = false
	s.marks.forget(id)
	fid := clientv3.LeaseID(found.Lease)
	sent := time.Now()
	if k := s.keepAliveOne(ctx, fid); k.err == nil && k.ttl > 0 {
		s.marks.put(id, markRec{lease: pooled{id: fid, ttl: k.ttl, fresh: sent}, key: string(found.Key)})
	}
}

// waitKnown is AcquireOrWait of a name the Locker last saw held, by a
// waiter whose mark it knows (rec): a read of the key, with a keep-alive
// of the mark's lease alongside. busy says another owner holds the name
// and the mark lives on: t is the answer. Otherwise the caller goes on
// to the transaction.
func (s *store) waitKnown(ctx context.Context, name, owner string, id markID, rec markRec, start time.Time) (t driver.Tenure, busy bool, err error) {
	ka := s.keeper.start(ctx, []clientv3.LeaseID{rec.lease.id})
	kv, err := s.reads.get(ctx, s.key(name))
	ttls, kaErr := ka.wait()
	if err != nil {
		return driver.Tenure{}, false, err
	}
	if kaErr != nil || ttls[0] == 0 {
		// The mark is gone, or may be: the transaction places it again.
		s.marks.forget(id)
		return driver.Tenure{}, false, nil
	}
	rec.lease.fresh, rec.lease.ttl = start, ttls[0]
	s.marks.put(id, rec)
	if kv == nil {
		s.busy.free(name)
		return driver.Tenure{}, false, nil
	}
	if string(kv.Value) == owner {
		return driver.Tenure{}, false, nil // the transaction takes the mark away
	}
	return s.holder(ctx, name, kv)
}

// markLease returns the etcd lease for id's mark: the one the Locker
// keeps for it, when it is sure to be alive (known), or one from the
// pool, or one granted now.
func (s *store) markLease(ctx context.Context, id markID, life time.Duration, start time.Time) (l tenureLease, known bool, err error) {
	if rec, ok := s.marks.get(id); ok && rec.alive(start) {
		return tenureLease{pooledLease: rec.lease, sec: ttlSeconds(life), id: rec.lease.id, ttl: rec.lease.ttl}, true, nil
	}
	l, err = s.leaseFor(ctx, life, start)
	return l, false, err
}

// markID names one waiter's mark on one name.
type markID struct{ name, waiter string }

// markRec is what a Locker knows of a waiter's mark on a name: the etcd
// lease it keeps for it (fresh: when it was last granted or kept alive),
// and the mark's key, "" when it has none.
type markRec struct {
	lease pooled
	key   string
}

// markMargin is how long before its end, by this process's clock, a lease
// kept for marks is no longer used: a transaction could reach etcd after
// it ended.
const markMargin = 500 * time.Millisecond

// alive reports whether the lease of r surely lives until a moment after
// now.
func (r markRec) alive(now time.Time) bool {
	return now.Before(r.lease.fresh.Add(time.Duration(r.lease.ttl)*time.Second - markMargin))
}

// marks remembers the marks of the Locker's waiters and their etcd
// leases. Forgetting one is harmless: the next AcquireOrWait reads the
// mark again, on a fresh lease. It holds at most maxMarks.
type marks = bounded[markID, markRec]

// maxMarks bounds the marks a Locker remembers.
const maxMarks = 4096
