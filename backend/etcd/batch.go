package etcdlease

import (
	"context"
	"sync"
	"time"

	"github.com/leasekit/lease/driver"
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
// Every tenure keeps its own etcd lease (tenures cannot share one: see
// "Why every tenure has its own etcd lease" in the package
// documentation), so a batch of n renewals is n keep-alives; they go out
// back to back on the Locker's keep-alive stream, and etcd answers them in
// one pass. Alongside them go the reads that check each tenure is intact
// and still on its lease: read-only transactions of up to 128 gets each,
// all sent at once. A batch whose leases the Locker knows (it acquired or
// renewed the tenures before, as lease.Run's renewer does) costs one
// round trip: n keep-alive messages and ⌈n/128⌉ read transactions. A
// tenure whose lease it does not know is read first and kept alive in a
// second round trip, together with every other such tenure of the batch.
// A tenure that must move to a lease of another TTL, or whose lease
// changed under the batch, is renewed by a single Renew, a few at a time.
func (s *store) RenewBatch(ctx context.Context, items []driver.RenewItem) ([]driver.RenewOutcome, error) {
	start := time.Now()
	out := make([]driver.RenewOutcome, len(items))
	keys := make([]string, len(items))
	leases := make([]leaseOf, len(items))
	knownAt := make([]int, len(items)) // index into kaIDs, or -1
	var kaIDs []clientv3.LeaseID
	for i, it := range items {
		keys[i] = s.key(it.Tenure.Name)
		knownAt[i] = -1
		if l, ok := s.known.lease(it.Tenure); ok {
			leases[i] = l
			if l.ttl == s.grantedTTL(it.TTL) && s.known.keepAliveStart(it.Tenure, l.id) {
				knownAt[i] = len(kaIDs)
				kaIDs = append(kaIDs, l.id)
			}
		}
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
		for i, at := range knownAt {
			if at >= 0 {
				s.known.keepAliveDone(items[i].Tenure, kaIDs[at], kaErr == nil)
			}
		}
	}
	var wg sync.WaitGroup

	var later []int // intact on a lease to keep alive now
	var singles []int
	for i, it := range items {
		t, kv := it.Tenure, kvs[i]
		switch {
		case s.known.isUnsettled(t):
			// A move of it failed without an answer: Renew moves it.
			singles = append(singles, i)
		case errs[i] != nil:
			out[i].Err = errs[i]
		case !isIntact(kv, t):
			s.known.forget(t)
			out[i].OK = false
		case knownAt[i] < 0 && leases[i].id != clientv3.NoLease:
			// Known on a lease of another TTL: it moves.
			singles = append(singles, i)
		case knownAt[i] < 0:
			later = append(later, i)
		case kaErr != nil:
			out[i].Err = kaErr
		case kv.Lease != int64(leases[i].id) || ttls[knownAt[i]] == 0:
			// Moved by a Locker of the same owner, or its lease ended
			// after the read: a single Renew looks again.
			singles = append(singles, i)
		default:
			s.renewed(&out[i], t, leases[i].id, ttls[knownAt[i]], start)
		}
	}

	// Second round trip: the keep-alives of the leases just read, and
	// the single Renews.
	wg.Go(func() { s.renewEach(ctx, items, singles, out) })
	if len(later) > 0 {
		ids := make([]clientv3.LeaseID, 0, len(later))
		var ready []int
		for _, i := range later {
			id := clientv3.LeaseID(kvs[i].Lease)
			if !s.known.keepAliveStart(items[i].Tenure, id) {
				continue // released meanwhile: lost
			}
			ids, ready = append(ids, id), append(ready, i)
		}
		later = ready
		var ttls []int64
		var err error
		if len(ids) > 0 {
			ttls, err = s.keeper.keepAlive(ctx, ids)
		}
		for n, i := range later {
			s.known.keepAliveDone(items[i].Tenure, ids[n], err == nil)
		}
		var again []int
		for n, i := range later {
			switch {
			case err != nil:
				out[i].Err = err
			case ttls[n] == 0 || ttls[n] != s.grantedTTL(items[i].TTL):
				// Its lease ended after the read, or has another TTL.
				again = append(again, i)
			default:
				s.renewed(&out[i], items[i].Tenure, ids[n], ttls[n], start)
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
	s.known.remember(o.Tenure, id, ttl)
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
