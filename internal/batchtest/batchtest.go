// Package batchtest lets the module's tests write a batch of renewals as
// a list of requests, and call RenewBatch (driver.Locker's, with its
// parallel slices of leases and ttls) with it.
package batchtest

import (
	"context"
	"time"

	"github.com/leasekit/lease"
)

// Req is one renewal of a batch: Lease for TTL.
type Req struct {
	Lease lease.Lease
	TTL   time.Duration
}

// Res is one renewal's outcome: the renewed Lease, or the error Renew
// would have returned.
type Res struct {
	Lease lease.Lease
	Err   error
}

// Batcher is a Locker with RenewBatch, as driver.Locker has it.
type Batcher interface {
	RenewBatch(ctx context.Context, leases []lease.Lease, ttls []time.Duration) ([]lease.Lease, []error)
}

// RenewBatch calls b.RenewBatch with reqs and pairs up the results. When
// b returns other than one Lease and one error per request, it returns
// what it got, paired up as far as both go.
func RenewBatch(ctx context.Context, b Batcher, reqs []Req) []Res {
	leases, ttls := make([]lease.Lease, len(reqs)), make([]time.Duration, len(reqs))
	for i, r := range reqs {
		leases[i], ttls[i] = r.Lease, r.TTL
	}
	out, errs := b.RenewBatch(ctx, leases, ttls)
	res := make([]Res, min(len(out), len(errs)))
	for i := range res {
		res[i] = Res{out[i], errs[i]}
	}
	return res
}
