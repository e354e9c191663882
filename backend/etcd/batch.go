package etcdlease

import (
	"context"
	"sync"
	"time"

	"github.com/leasekit/lease/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var _ driver.BatchRenewer = (*store)(nil)

// batchSingles bounds the single Renews a batch falls back on at once
// (tenures that must move to a lease of another TTL, or whose lease
// changed under the batch).
const batchSingles = 8

// RenewBatch implements driver.BatchRenewer: each tenure is renewed as
// Renew would renew it, with the same outcome, and the round trips do not
// grow with the batch.
//
// The tenures a Locker acquired in a burst share etcd leases (see "Which
// tenures share an etcd lease" in the package documentation): an etcd
// lease is kept alive once when the batch renews every tenure the ledger
// says it may carry (a group's, or a lease of one tenure's own). The keep-alives go out back to back
// on the Locker's keep-alive streams, and etcd answers them in one pass.
// Alongside them go the reads that check each tenure is intact and still
// on its lease: read-only transactions of up to 128 gets each, all sent at
// once. A batch whose leases the Locker knows (it acquired or renewed the
// tenures before, as lease.Run's renewer does) costs one round trip: a
// keep-alive per lease and ⌈n/128⌉ read transactions. A tenure whose
// lease it does not know is read first; a LeaseTimeToLive of its lease
// then lists the keys on it, and the keep-alive goes out in a third round
// trip, together with every other such tenure of the batch, if the lease
// carries nothing else. A tenure that must move to a lease of its own
// (another TTL, a group the batch does not cover, a lease that carries
// other keys) or whose lease changed under the batch is renewed by a
// single Renew, a few at a time.
func (s *store) RenewBatch(ctx context.Context, items []driver.RenewItem) ([]driver.RenewOutcome, error) {
	start := time.Now()
	out := make([]driver.RenewOutcome, len(items))
	keys := make([]string, len(items))
	leases := make([]seenOn, len(items))
	knownAt := make([]int, len(items)) // index into kaIDs, or -1
	var kaIDs []clientv3.LeaseID
	byLease := map[clientv3.LeaseID][]int{}
	shared := make([]bool, len(items)) // renewed by a single Renew
	for i, it := range items {
		keys[i] = s.key(it.Tenure.Name)
		knownAt[i] = -1
		l, ok := s.ledger.lease(it.Tenure)
		if !ok {
			continue
		}
		leases[i] = l
		switch {
		case l.ttl != s.grantedTTL(it.TTL):
		case s.ledger.own(l.id):
			byLease[l.id] = append(byLease[l.id], i)
		default:
			// A lease this Locker only read: Renew checks it carries
			// nothing else.
			shared[i] = true
		}
	}
	// An own lease is kept alive once, for all its tenures, when the
	// batch renews every tenure the ledger says it may carry; otherwise
	// those in the batch move onto leases of their own (see grants).
	for id, idx := range byLease {
		in := make(map[tenureKey]bool, len(idx))
		for _, i := range idx {
			in[keyOf(items[i].Tenure)] = true
		}
		if !s.ledger.keepAliveCovers(id, in) {
			for _, i := range idx {
				shared[i] = true
			}
			continue
		}
		for _, i := range idx {
			knownAt[i] = len(kaIDs)
		}
		kaIDs = append(kaIDs, id)
	}

	// First round trip: the keep-alives of the known leases, and a read
	// of every key.
	var ttls []int64
	var kaErr error
	var ka *kaCall
	if len(kaIDs) > 0 {
		ka = s.keeper.start(ctx, kaIDs)
	}
	kvs, errs := s.getMany(ctx, keys)
	if ka != nil {
		ttls, kaErr = ka.wait()
		for _, id := range kaIDs {
			s.ledger.keepAliveDone(id, kaErr == nil)
		}
	}
	var wg sync.WaitGroup

	var later []int // intact on a lease to keep alive now
	var singles []int
	for i, it := range items {
		t, kv := it.Tenure, kvs[i]
		switch {
		case shared[i]:
			singles = append(singles, i)
		case s.ledger.isUnsettled(t):
			// A move of it failed without an answer: Renew moves it.
			singles = append(singles, i)
		case errs[i] != nil:
			out[i].Err = errs[i]
		case !isIntact(kv, t):
			s.dispose(ctx, s.ledger.gone(t)...)
			out[i].OK = false
		case knownAt[i] < 0 && leases[i].id != clientv3.NoLease:
			// Known on a lease of another TTL: it moves.
			singles = append(singles, i)
		case knownAt[i] < 0:
			later = append(later, i)
		default:
			var kaTTL int64
			if kaErr == nil {
				kaTTL = ttls[knownAt[i]]
			}
			switch judgeRenewal(t, leases[i].id, kv, kaTTL, kaErr) {
			case renewalFailed:
				out[i].Err = kaErr
			case renewalLookAgain:
				// Moved by a Locker of the same owner, or its lease
				// ended after the read: a single Renew looks again.
				singles = append(singles, i)
			case renewalDone:
				s.renewed(&out[i], t, leases[i].id, kaTTL, start)
			}
		}
	}

	// Second round trip: the keep-alives of the leases just read, and
	// the single Renews.
	wg.Go(func() { s.renewEach(ctx, items, singles, out) })
	if len(later) > 0 {
		sole := s.soleMany(ctx, items, kvs, later, out)
		ids := make([]clientv3.LeaseID, 0, len(later))
		var ready, moving []int
		for n, i := range later {
			id := clientv3.LeaseID(kvs[i].Lease)
			switch {
			case out[i].Err != nil:
				continue
			case !sole[n]:
				moving = append(moving, i)
				continue
			case !s.ledger.keepAliveStart(items[i].Tenure, id):
				moving = append(moving, i) // it left the lease meanwhile
				continue
			}
			ids, ready = append(ids, id), append(ready, i)
		}
		wg.Go(func() { s.renewEach(ctx, items, moving, out) })
		later = ready
		var ttls []int64
		var err error
		if len(ids) > 0 {
			ttls, err = s.keeper.keepAlive(ctx, ids)
		}
		for _, id := range ids {
			s.ledger.keepAliveDone(id, err == nil)
		}
		var again []int
		for n, i := range later {
			var kaTTL int64
			if err == nil {
				kaTTL = ttls[n]
			}
			switch judgeRenewal(items[i].Tenure, ids[n], kvs[i], kaTTL, err) {
			case renewalFailed:
				out[i].Err = err
			case renewalDone:
				if kaTTL == s.grantedTTL(items[i].TTL) {
					s.renewed(&out[i], items[i].Tenure, ids[n], kaTTL, start)
					break
				}
				// Its lease has another TTL: a single Renew moves it.
				again = append(again, i)
			default:
				// Its lease ended after the read.
				again = append(again, i)
			}
		}
		s.renewEach(ctx, items, again, out)
	}
	wg.Wait()
	return out, nil
}

// renewed records in o that t was renewed on lease id, granted ttl
// seconds, by requests sent after start.
func (s *store) renewed(o *driver.RenewOutcome, t driver.Tenure, id clientv3.LeaseID, ttl int64, start time.Time) {
	o.Tenure = held(t.Name, t.Owner, int64(t.Token), start, ttl)
	o.OK = true
	s.ledger.kept(o.Tenure, id, ttl)
}

// renewEach renews items[i] for each i in idx with Renew, batchSingles at
// a time.
func (s *store) renewEach(ctx context.Context, items []driver.RenewItem, idx []int, out []driver.RenewOutcome) {
	if len(idx) == 0 {
		return
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(batchSingles, len(idx)) {
		wg.Go(func() {
			for i := range work {
				t, ok, err := s.Renew(ctx, items[i].Tenure, items[i].TTL)
				out[i] = driver.RenewOutcome{Tenure: t, OK: ok, Err: err}
			}
		})
	}
	for _, i := range idx {
		work <- i
	}
	close(work)
	wg.Wait()
}

// maxSoleChecks bounds the LeaseTimeToLive calls of one soleMany under
// way at once: a batch as large as lease.Run's renewer sends goes out in
// one wave.
const maxSoleChecks = 512

// soleMany is soleOn for each tenure items[i], i in idx, on the lease
// kvs[i] names, all at once (up to maxSoleChecks); a failure goes into
// out[i].Err.
func (s *store) soleMany(ctx context.Context, items []driver.RenewItem, kvs []*mvccpb.KeyValue, idx []int, out []driver.RenewOutcome) []bool {
	sole := make([]bool, len(idx))
	sem := make(chan struct{}, maxSoleChecks)
	var wg sync.WaitGroup
	for n, i := range idx {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var err error
			sole[n], err = s.soleOn(ctx, items[i].Tenure, clientv3.LeaseID(kvs[i].Lease))
			if err != nil {
				out[i].Err = err
			}
		})
	}
	wg.Wait()
	return sole
}
