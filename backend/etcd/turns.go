package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasekit/lease/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	_ driver.TurnWatcher = (*store)(nil)
)

// The line of waiters (driver.TurnWatcher): one line per name, its marks (see
// "The line invariant" in the package documentation). A waiting Locker's
// mark on a name is a key
//
//	<prefix>\xffw<name>\xff<waiter>\xff<seq>   value: empty
//
// on an etcd lease of the mark's own, granted for Mark.Life rounded up to
// whole seconds, which each AcquireOrWait of the waiter keeps alive
// alongside its transaction: a mark lapses its life after the last
// AcquireOrWait that renewed it, by etcd's clock, when etcd deletes it
// with its lease. Its create revision is its place in line. Marks start
// with the byte 0xff, which no name holds, so List and the tenure keys
// never see them; seq (16 hex digits, drawn from a counter of the
// Locker's) changes whenever a mark goes to the back of the line, so that
// the new key gets a new create revision in the transaction that deletes
// the old one.
//
// AcquireOrWait is one transaction, Acquire's with more in its branches:
//
//	if the name's key does not exist (and, with Fair, the waiter's mark
//	is first, or the line is empty: firstInLine):
//	    put it; delete the waiter's mark (Keep: put a new one, delete the rest)
//	else: read the key, and
//	    if its value is owner (re-entry): as above
//	    else if the waiter has no mark: put one
//	    else: (move the mark onto a lease of this call's life, when the
//	          Locker knows it on another;) read the mark
//	    (with Fair: read the first mark, for a free name's answer)
//
// The decision. When the name's key is deleted at revision R, the turn
// goes to the waiter of the first mark as of R, or to every turn Watch
// when there is none: a function of etcd's state at R, so every Locker
// makes the same choice, whatever order its watches delivered their
// events in and whatever it has seen of the marks. A Release reads that
// mark in the transaction that deletes the key (firstMark) and, when
// there is one, names its waiter in a put of the name's pass key
// (nameChoice: "\xff<R> <waiter>", on the mark's etcd lease): one
// request of the releasing Locker instead of one Range per waiting
// Locker. A Locker that sees the deletion but no such put within
// choiceGrace (an expiry, a ForceRelease, a Release by an older version,
// or a put that failed) reads the first mark as of R itself (chosen, in
// watch.go: one Range at revision R), and so decides the same.
// StopWaiting of the first mark while the name is free puts the name's
// pass key with its own waiter ID in its transaction, and every Locker
// judges that put the same way, by the first mark at its revision: the
// next waiter wakes.

// marksPrefix is the prefix of the marks of name.
func (s *store) marksPrefix(name string) string {
	return s.prefix + waitSep + "w" + name + waitSep
}

// waitSep starts every waiter's key after the prefix (marks, pass keys),
// and ends the name in a mark's key: a byte that valid UTF-8 never holds.
const waitSep = "\xff"

// passKey is the key whose put tells every Locker watching name that a
// StopWaiting passed the turn on (see StopWaiting).
func (s *store) passKey(name string) string {
	return s.prefix + waitSep + "p" + name
}

// choiceTag starts the value of a pass key put by a Release, which names
// the chosen waiter ("\xff<R> <waiter>"); a waiter ID, the value that
// StopWaiting puts, is printable ASCII and never starts with it.
const choiceTag = "\xff"

// firstMark is the read, in a release's transaction after the deletion of
// the name's key, of the first mark of name then: the one created first.
// It is read whole (a mark's value is empty), since a keys-only read
// leaves out the mark's etcd lease on etcd 3.7, and nameChoice puts the
// pass key on it.
func (s *store) firstMark(name string) clientv3.Op {
	return clientv3.OpGet(s.marksPrefix(name), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
}

// nameChoice tells the Lockers that watch name whom the release answered
// by resp chose, when its transaction (with firstMark after the deletion)
// found a mark: one put of the pass key naming the release's revision and
// the mark's waiter, on the mark's etcd lease, so that it goes with the
// mark. A put that fails costs each waiting Locker its own read (see
// chosen).
func (s *store) nameChoice(ctx context.Context, name string, resp *clientv3.TxnResponse) {
	if len(resp.Responses) < 2 {
		return
	}
	kvs := resp.Responses[1].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return
	}
	marks := s.marksPrefix(name)
	value := choiceTag + strconv.FormatInt(resp.Header.Revision, 10) + " " + markWaiter(string(kvs[0].Key), marks)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, _ = s.client.Put(ctx, s.passKey(name), value, clientv3.WithLease(clientv3.LeaseID(kvs[0].Lease)))
}

// releaseChoice parses the value of a pass key put by nameChoice: the
// release's revision and the waiter it chose; ok is false for another
// value (a StopWaiting's).
func releaseChoice(value []byte) (rev int64, waiter string, ok bool) {
	rest, tagged := strings.CutPrefix(string(value), choiceTag)
	if !tagged {
		return 0, "", false
	}
	r, waiter, found := strings.Cut(rest, " ")
	rev, err := strconv.ParseInt(r, 10, 64)
	if !found || err != nil {
		return 0, "", false
	}
	return rev, waiter, true
}

// markBase is the prefix of waiter's mark on name: the mark is markBase
// followed by its seq.
func (s *store) markBase(name, waiter string) string {
	return s.marksPrefix(name) + waiter + waitSep
}

// newMarkKey is a mark key under base that no mark of this Locker has had.
func (s *store) newMarkKey(base string) string {
	return fmt.Sprintf("%s%016x", base, s.markSeq.Add(1))
}

// WatchTurn implements driver.TurnWatcher. It is Watch (sharing the
// name's etcd watches with the Locker's other Watches of it), with a
// choice: a deletion of the name's key wakes the turn Watch only when
// the oldest mark then is waiter's, or there is no mark.
func (s *store) WatchTurn(ctx context.Context, name, waiter string) (driver.Watch, error) {
	return s.watch(ctx, name, true, waiter)
}

// StopWaiting implements driver.TurnWatcher: one transaction that deletes
// waiter's mark on name and, when the name is free and that mark is
// there and first in line (compared in the same transaction: the name's
// key does not exist, the mark has the create revision the Locker knows,
// and no mark was created before it), puts the name's pass key, whose
// put every Locker watching the name judges as a release: it wakes the
// turn Watches of the waiter whose mark is first at that revision, now
// the next one, or every turn Watch when none is left (see chosen in
// watch.go). A Locker that does not know its mark (it forgot it, or an
// AcquireOrWait failed) reads it first: one Range more.
//
// The pass key goes on the mark's etcd lease, which the transaction
// finds alive (the mark is on it), so it ends with it; the lease, kept
// for the waiter's next mark, expires by itself.
func (s *store) StopWaiting(ctx context.Context, name, waiter string) error {
	id := markID{name, waiter}
	base := s.markBase(name, waiter)
	rec, ok := s.marks.get(id)
	if !ok || rec.key == "" {
		r, err := s.client.Get(ctx, base, clientv3.WithPrefix(), clientv3.WithLimit(1))
		if err != nil {
			return fmt.Errorf("read the mark: %w", err)
		}
		if len(r.Kvs) == 0 {
			return nil
		}
		kv := r.Kvs[0]
		rec = markRec{lease: pooled{id: clientv3.LeaseID(kv.Lease)}, key: string(kv.Key), rev: kv.CreateRevision}
	}
	drop := clientv3.OpDelete(base, clientv3.WithPrefix())
	_, err := s.writes.txn(ctx, s.key(name),
		append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(s.key(name)), "=", 0)}, s.firstInLine(name, rec)...),
		[]clientv3.Op{drop, clientv3.OpPut(s.passKey(name), waiter, clientv3.WithLease(rec.lease.id))},
		[]clientv3.Op{drop})
	if err != nil {
		return err
	}
	// The mark is gone; its lease stays for the next one.
	s.marks.change(id, func(r markRec) markRec { r.key, r.rev = "", 0; return r })
	return nil
}

// firstInLine are the comparisons that hold when rec, a waiter's mark on
// name, is there and no mark of name was created before it, or, when rec
// has no key, when name has no mark at all. (A range comparison holds
// when every key in the range passes it; over an empty range it compares
// a key that does not exist, whose create revision is 0.)
func (s *store) firstInLine(name string, rec markRec) []clientv3.Cmp {
	marks := s.marksPrefix(name)
	if rec.key == "" {
		return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(marks), "=", 0).WithPrefix()}
	}
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(rec.key), "=", rec.rev),
		clientv3.Compare(clientv3.CreateRevision(marks), ">", rec.rev-1).WithPrefix(),
	}
}

// AcquireOrWait implements driver.TurnWatcher: Acquire, whose
// transaction also places, keeps or takes away m.Waiter's mark (see
// above), and, with m.Fair, compares that the mark is first in line. A
// busy answer keeps the mark's etcd lease alive while it reads the
// holder's remaining time (or the first mark's, when the name is free
// but another waiter is ahead), so that the mark lasts m.Life from now;
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
	life := s.grantedTTL(m.Life)
	if s.busy.likelyHeld(name, start) {
		if rec, ok := s.marks.get(id); ok && rec.key != "" && rec.alive(start) && rec.lease.ttl == life {
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
		rec, _ := s.marks.get(id)
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
		// Marks are read whole (their value is empty): a keys-only Range
		// leaves out the etcd lease on etcd 3.7, which reads keys only
		// from its index.
		//
		// The waiter's mark, when it has one, is read; when the Locker
		// knows it on a lease of another life (an earlier call's), it
		// moves onto ml first, keeping its create revision: its place.
		found := []clientv3.Op{clientv3.OpGet(base, clientv3.WithPrefix())}
		if !known && rec.key != "" {
			found = append([]clientv3.Op{clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(rec.key), "=", rec.rev)},
				[]clientv3.Op{clientv3.OpPut(rec.key, "", clientv3.WithLease(ml.id))}, nil)}, found...)
		}
		wait := clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(base), "=", 0).WithPrefix()},
			[]clientv3.Op{clientv3.OpPut(mk, "", clientv3.WithLease(ml.id))},
			found)
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
		if m.Fair {
			cmps = append(cmps, s.firstInLine(name, rec)...)
		}
		then := append([]clientv3.Op{clientv3.OpPut(key, owner, clientv3.WithLease(l.id))}, took...)
		els := []clientv3.Op{
			clientv3.OpGet(key),
			clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", owner)}, took, []clientv3.Op{wait}),
		}
		if m.Fair {
			// The first mark in line: the waiter ahead when the name is
			// free.
			els = append(els, clientv3.OpGet(s.marksPrefix(name), clientv3.WithPrefix(),
				clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1)))
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
			s.marks.put(id, markRec{lease: ml.pooledLease, key: mk, rev: resp.Header.Revision})
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
		if owned == nil || len(kvs) == 0 && (!m.Fair || owned.Succeeded || len(resp.Responses) < 3) {
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
		if placed == nil || len(placed.Responses) == 0 {
			s.unused(ctx, l)
			dropMark()
			return driver.Tenure{}, nil, errShortAnswer
		}
		var ka *kaCall // the mark's keep-alive, alongside the reads below
		var markKey string
		var markRev int64
		if placed.Succeeded {
			s.usedUp(ml)
			markKey, markRev = mk, resp.Header.Revision
		} else if found := placed.Responses[len(placed.Responses)-1].GetResponseRange().GetKvs(); len(found) > 0 && clientv3.LeaseID(found[0].Lease) == ml.id {
			if !known {
				s.usedUp(ml) // moved onto it
			}
			markKey, markRev = string(found[0].Key), found[0].CreateRevision
		} else if len(found) > 0 {
			s.adopt(ctx, id, found[0], &ml, &known)
		} else {
			dropMark()
		}
		sent := time.Now()
		if markKey != "" {
			s.marks.put(id, markRec{lease: ml.pooledLease, key: markKey, rev: markRev})
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
		var t driver.Tenure
		var busy bool
		var first []*mvccpb.KeyValue
		if len(kvs) == 0 {
			first = resp.Responses[2].GetResponseRange().GetKvs()
		}
		switch {
		case len(kvs) > 0:
			t, busy, err = s.holder(ctx, name, kvs[0])
		case len(first) > 0 && !strings.HasPrefix(string(first[0].Key), base):
			// The name is free, but another waiter's mark is first: the
			// answer is the time that mark has left, by its etcd lease
			// (read alongside the keep-alive, as a holder's time is).
			t, busy, err = s.ahead(ctx, name, first[0])
		}
		// Otherwise the name is free and the waiter's own mark first (or
		// the line empty) although the comparison failed: the Locker's
		// memory of its mark was stale, and is not any more.
		if ka != nil {
			if ttls, kerr := ka.wait(); kerr == nil && ttls[0] > 0 {
				ml.pooledLease.fresh, ml.pooledLease.ttl = sent, ttls[0]
				s.marks.put(id, markRec{lease: ml.pooledLease, key: markKey, rev: markRev})
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
			switch {
			case err != nil || busy:
			case len(kvs) > 0:
				t = driver.Tenure{Name: name, Owner: string(kvs[0].Value), Token: uint64(kvs[0].CreateRevision), Remaining: time.Second}
			default:
				err = fmt.Errorf("etcd: the line of %q kept changing while AcquireOrWait of waiter %q looked at it (%d transactions)", name, m.Waiter, busyRetries)
			}
			return t, nil, err
		}
		// The holder's etcd lease, or the first mark's, ended after the
		// transaction read it, or the waiter is first after all: look
		// again, with the lease already in hand.
	}
}

// ahead is the answer of a fair AcquireOrWait of name, which is free,
// when kv is the first mark in line and not the caller's: no owner, and
// the time kv's etcd lease has left. busy is false if that lease ended
// meanwhile.
func (s *store) ahead(ctx context.Context, name string, kv *mvccpb.KeyValue) (t driver.Tenure, busy bool, err error) {
	left, ok, err := s.remaining(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		return driver.Tenure{}, false, fmt.Errorf("read the time the first waiter's mark has left: %w", err)
	}
	return driver.Tenure{Name: name, Remaining: left}, ok, nil
}

// adopt records found, waiter's mark as the transaction found it. When it
// is on another etcd lease than ml (the Locker had forgotten its mark),
// ml goes back and the mark's own lease is kept alive now, so that the
// mark lasts its life from this call.
func (s *store) adopt(ctx context.Context, id markID, found *mvccpb.KeyValue, ml *tenureLease, known *bool) {
	if clientv3.LeaseID(found.Lease) == ml.id {
		s.marks.put(id, markRec{lease: ml.pooledLease, key: string(found.Key), rev: found.CreateRevision})
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
		s.marks.put(id, markRec{lease: pooled{id: fid, ttl: k.ttl, fresh: sent}, key: string(found.Key), rev: found.CreateRevision})
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
// keeps for it, when it is sure to be alive and was granted for life
// (known), or one from the pool, or one granted now.
func (s *store) markLease(ctx context.Context, id markID, life time.Duration, start time.Time) (l tenureLease, known bool, err error) {
	if rec, ok := s.marks.get(id); ok && rec.alive(start) && rec.lease.ttl == s.grantedTTL(life) {
		return tenureLease{pooledLease: rec.lease, sec: ttlSeconds(life), id: rec.lease.id, ttl: rec.lease.ttl}, true, nil
	}
	l, err = s.leaseFor(ctx, life, start)
	return l, false, err
}

// markID names one waiter's mark on one name.
type markID struct{ name, waiter string }

// markRec is what a Locker knows of a waiter's mark on a name: the etcd
// lease it keeps for it (fresh: when it was last granted or kept alive),
// and the mark's key, "" when it has none, and its create revision (its
// place in line).
type markRec struct {
	lease pooled
	key   string
	rev   int64
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
