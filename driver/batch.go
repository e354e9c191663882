package driver

import (
	"context"
	"sync"
	"time"

	"github.com/leasekit/lease"
)

// fallbackWorkers bounds the Renew calls that RenewBatch makes at once for
// a Store that is not a BatchRenewer.
const fallbackWorkers = 8

var _ lease.BatchRenewer = (*Locker)(nil)

// RenewBatch implements lease.BatchRenewer. Each request is checked as
// Renew checks it, and each result is what Renew would have returned. The
// Store's RenewBatch renews the valid ones in one call when the Store is a
// BatchRenewer; otherwise they are renewed one by one, a few at a time.
func (l *Locker) RenewBatch(ctx context.Context, reqs []lease.RenewRequest) []lease.RenewResult {
	const op = "renew"
	out := make([]lease.RenewResult, len(reqs))
	valid := make([]int, 0, len(reqs))
	for i, r := range reqs {
		if err := CheckRenew(r.Lease, r.TTL); err != nil {
			out[i].Err = l.invalid(op, err)
			continue
		}
		valid = append(valid, i)
	}
	if len(valid) == 0 {
		return out
	}
	if err := l.begin(ctx); err != nil {
		for _, i := range valid {
			out[i].Err = l.fail(ctx, op, reqs[i].Lease.Name, err)
		}
		return out
	}
	bs, ok := l.store.(BatchRenewer)
	if !ok {
		l.renewEach(ctx, reqs, valid, out)
		return out
	}
	items := make([]RenewItem, len(valid))
	for k, i := range valid {
		items[k] = RenewItem{Tenure: tenureOf(reqs[i].Lease), TTL: reqs[i].TTL}
	}
	start := time.Now()
	outcomes, err := bs.RenewBatch(ctx, items)
	if err == nil && len(outcomes) != len(items) {
		err = errBatchLength(len(outcomes), len(items))
	}
	for k, i := range valid {
		ls := reqs[i].Lease
		switch {
		case err != nil:
			out[i].Err = l.fail(ctx, op, ls.Name, err)
		case outcomes[k].Err != nil:
			out[i].Err = l.fail(ctx, op, ls.Name, outcomes[k].Err)
		case !outcomes[k].OK:
			out[i].Err = l.lost(op, ls)
		default:
			out[i].Lease, out[i].Err = l.held(ctx, op, ls.Name, ls.Owner, Tenure{Token: ls.Token, Expires: outcomes[k].Tenure.Expires}, start, reqs[i].TTL)
		}
	}
	return out
}

// renewEach renews the valid requests one Store.Renew at a time, up to
// fallbackWorkers at once, each with its own Deadline.
func (l *Locker) renewEach(ctx context.Context, reqs []lease.RenewRequest, valid []int, out []lease.RenewResult) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(fallbackWorkers, len(valid)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				ls, ttl := reqs[i].Lease, reqs[i].TTL
				start := time.Now()
				t, ok, err := l.store.Renew(ctx, tenureOf(ls), ttl)
				switch {
				case err != nil:
					out[i].Err = l.fail(ctx, "renew", ls.Name, err)
				case !ok:
					out[i].Err = l.lost("renew", ls)
				default:
					t.Owner, t.Token = ls.Owner, ls.Token
					out[i].Lease, out[i].Err = l.held(ctx, "renew", ls.Name, ls.Owner, t, start, ttl)
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
