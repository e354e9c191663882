package driver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leasekit/lease"
)

// fallbackWorkers bounds the Renew calls that RenewBatch makes at once for
// a Store that is not a BatchRenewer.
const fallbackWorkers = 8

// RenewBatch renews leases[i] for ttls[i], each exactly as Renew would,
// and returns, in order, the renewed Lease (with its new Expires and
// Deadline) or the error Renew would have returned: nil when renewed, an
// error matching lease.ErrLost when that tenure was not intact (nothing was
// changed), lease.ErrInvalid for a malformed lease or ttl, and the store's
// error otherwise (often the same for every lease, when the call as a
// whole failed). The Store's RenewBatch renews the valid ones in one call
// when the Store is a BatchRenewer; otherwise they are renewed one by one,
// a few at a time.
//
// lease.Run renews through this method: the Runs that share a Locker
// share one renewer, which coalesces the renewals that fall due together
// into one call. A wrapper of a Locker (otellease's, a user's own) that
// has a method of this name and signature is renewed through it too.
// When len(ttls) != len(leases), every result is an error matching
// lease.ErrInvalid and nothing reaches the store.
func (l *Locker) RenewBatch(ctx context.Context, leases []lease.Lease, ttls []time.Duration) ([]lease.Lease, []error) {
	const op = "renew"
	out := make([]lease.Lease, len(leases))
	errs := make([]error, len(leases))
	if len(ttls) != len(leases) {
		err := l.invalid(op, fmt.Errorf("%d ttls for %d leases", len(ttls), len(leases)))
		for i := range errs {
			errs[i] = err
		}
		return out, errs
	}
	valid := make([]int, 0, len(leases))
	for i, ls := range leases {
		if err := CheckRenew(ls, ttls[i]); err != nil {
			errs[i] = l.invalid(op, err)
			continue
		}
		valid = append(valid, i)
	}
	if len(valid) == 0 {
		return out, errs
	}
	if err := l.begin(ctx); err != nil {
		for _, i := range valid {
			errs[i] = l.fail(ctx, op, leases[i].Name, err)
		}
		return out, errs
	}
	bs, ok := l.store.(BatchRenewer)
	if !ok {
		l.renewEach(ctx, leases, ttls, valid, out, errs)
		return out, errs
	}
	items := make([]RenewItem, len(valid))
	for k, i := range valid {
		items[k] = RenewItem{Tenure: tenureOf(leases[i]), TTL: ttls[i]}
	}
	start := time.Now()
	outcomes, err := bs.RenewBatch(ctx, items)
	if err == nil && len(outcomes) != len(items) {
		err = errBatchLength(len(outcomes), len(items))
	}
	for k, i := range valid {
		ls := leases[i]
		switch {
		case err != nil:
			errs[i] = l.fail(ctx, op, ls.Name, err)
		case outcomes[k].Err != nil:
			errs[i] = l.fail(ctx, op, ls.Name, outcomes[k].Err)
		case !outcomes[k].OK:
			errs[i] = l.lost(op, ls)
		default:
			acquired := outcomes[k].Tenure.Acquired
			if acquired.IsZero() {
				acquired = ls.Acquired
			}
			out[i], errs[i] = l.held(ctx, op, ls.Name, ls.Owner, Tenure{Token: ls.Token, Expires: outcomes[k].Tenure.Expires, Acquired: acquired}, start, ttls[i])
		}
	}
	return out, errs
}

// renewEach renews the valid requests one Store.Renew at a time, up to
// fallbackWorkers at once, each with its own Deadline.
func (l *Locker) renewEach(ctx context.Context, leases []lease.Lease, ttls []time.Duration, valid []int, out []lease.Lease, errs []error) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(fallbackWorkers, len(valid)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				ls, ttl := leases[i], ttls[i]
				start := time.Now()
				t, ok, err := l.store.Renew(ctx, tenureOf(ls), ttl)
				switch {
				case err != nil:
					errs[i] = l.fail(ctx, "renew", ls.Name, err)
				case !ok:
					errs[i] = l.lost("renew", ls)
				default:
					t.Owner, t.Token = ls.Owner, ls.Token
					if t.Acquired.IsZero() {
						t.Acquired = ls.Acquired
					}
					out[i], errs[i] = l.held(ctx, "renew", ls.Name, ls.Owner, t, start, ttl)
				}
			}
		}()
	}
	for _, i := range valid {
		work <- i
	}
	close(work)
	wg.Wait()
}
