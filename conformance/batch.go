package conformance

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// Contract line 4 for RenewBatch (driver.Locker.RenewBatch, which
// lease.Run renews through): a batch of renewals gives each tenure the
// answer and the expiry its own Renew would.

// batcher is a Locker with RenewBatch, as driver.Locker has it.
type batcher interface {
	RenewBatch(ctx context.Context, leases []lease.Lease, ttls []time.Duration) ([]lease.Lease, []error)
}

// renewReq and renewRes are one renewal of a batch and its outcome, as
// the cases below write them.
type renewReq struct {
	Lease lease.Lease
	TTL   time.Duration
}

type renewRes struct {
	Lease lease.Lease
	Err   error
}

// renewBatch calls br.RenewBatch with reqs and pairs up the results; a
// batch that returns other than one Lease and one error per request
// fails the case.
func renewBatch(t testing.TB, ctx context.Context, br batcher, reqs []renewReq) []renewRes {
	t.Helper()
	leases, ttls := make([]lease.Lease, len(reqs)), make([]time.Duration, len(reqs))
	for i, r := range reqs {
		leases[i], ttls[i] = r.Lease, r.TTL
	}
	out, errs := br.RenewBatch(ctx, leases, ttls)
	if len(out) != len(reqs) || len(errs) != len(reqs) {
		t.Fatalf("RenewBatch returned %d leases and %d errors for %d requests", len(out), len(errs), len(reqs))
	}
	res := make([]renewRes, len(reqs))
	for i := range res {
		res[i] = renewRes{out[i], errs[i]}
	}
	return res
}

// batchRenewer returns l's RenewBatch, or skips the case.
func batchRenewer(t testing.TB, l lease.Locker) batcher {
	t.Helper()
	br, ok := l.(batcher)
	if !ok {
		t.Skip("the Locker has no RenewBatch")
	}
	return br
}

// batchAnswersInPlace: the results of a batch whose requests are in no
// particular order (not by name, not by owner, not by token) answer the
// requests in their places: result i is request i's tenure.
func batchAnswersInPlace(t testing.TB, s *suite) {
	l := s.locker(t)
	br := batchRenewer(t, l)
	const n = 7
	held := make([]lease.Lease, n)
	for i := range n {
		// Names acquired in one order, sorted in another, and asked for
		// in a third.
		held[i], _ = s.acquire(t, l, s.name(fmt.Sprintf("batch-order-%d", (i*5)%n)), fmt.Sprintf("owner-%d", n-i), long)
	}
	order := []int{3, 0, 6, 2, 5, 1, 4}
	reqs := make([]renewReq, n)
	for i, j := range order {
		reqs[i] = renewReq{Lease: held[j], TTL: long}
	}
	res := renewBatch(t, t.Context(), br, reqs)
	if len(res) != n {
		t.Fatalf("RenewBatch returned %d results for %d requests", len(res), n)
	}
	for i, r := range res {
		if r.Err != nil {
			failCall(t, fmt.Sprintf("RenewBatch request %d", i), r.Err)
		}
		want := reqs[i].Lease
		if r.Lease.Name != want.Name || r.Lease.Owner != want.Owner || r.Lease.Token != want.Token {
			t.Fatalf("RenewBatch result %d is the tenure of %q (owner %q, token %d); request %d asked for %q (owner %q, token %d)",
				i, r.Lease.Name, r.Lease.Owner, r.Lease.Token, i, want.Name, want.Owner, want.Token)
		}
	}
}

// batchMixedTTLs: in a batch that renews one tenure for the shortest ttl
// and another for a long one, each expires by its own ttl: the first is
// free after its ttl, the second still held.
func batchMixedTTLs(t testing.TB, s *suite) {
	l := s.locker(t)
	br := batchRenewer(t, l)
	short, _ := s.acquire(t, l, s.name("batch-mixed-short"), "owner-a", long)
	longer, _ := s.acquire(t, l, s.name("batch-mixed-long"), "owner-a", long)
	res := renewBatch(t, t.Context(), br, []renewReq{{Lease: short, TTL: s.h.TTL}, {Lease: longer, TTL: long}, {Lease: short, TTL: s.h.TTL}})
	renewed := time.Now()
	for i, r := range res[:2] {
		if r.Err != nil {
			failCall(t, fmt.Sprintf("RenewBatch request %d", i), r.Err)
		}
	}
	s.expire(t, l, short.Name, s.h.TTL, renewed)
	s.mustHold(t, l, res[1].Lease, fmt.Sprintf("after the tenure renewed beside it for %s expired", s.h.TTL))
}

// batchLeavesTakerAlone: a batch that asks to renew, for a long ttl, a
// tenure another owner has since taken over answers lost, and the taker's
// tenure keeps exactly the expiry its own grant gave it: it is free after
// its own ttl.
func batchLeavesTakerAlone(t testing.TB, s *suite) {
	l, other := s.locker(t), s.locker(t)
	br := batchRenewer(t, l)
	name := s.name("batch-taker")
	old, granted := s.acquire(t, l, name, "owner-a", s.h.TTL)
	s.expire(t, l, name, s.h.TTL, granted)
	taker, takenAt := s.acquire(t, other, name, "owner-b", 2*s.h.TTL)
	res := renewBatch(t, t.Context(), br, []renewReq{{Lease: old, TTL: long}})
	mustBeLost(t, "RenewBatch of a tenure another owner took over", res[0].Err)
	s.mustHold(t, other, taker, "right after a batch asked to renew the tenure it took over")
	s.expire(t, other, name, 2*s.h.TTL, takenAt)
}

// batchAsLargeAsRun: a batch of as many tenures as lease.Run's renewer
// sends at once keeps every one of them held past the expiry its grant
// gave it.
func batchAsLargeAsRun(t testing.TB, s *suite) {
	l := s.locker(t)
	br := batchRenewer(t, l)
	const n = 300
	ttl := 2 * s.h.TTL
	reqs := make([]renewReq, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			reqs[i].Lease, errs[i] = l.Acquire(t.Context(), s.name(fmt.Sprintf("batch-large-%03d", i)), "owner-a", ttl)
			reqs[i].TTL = long
		})
	}
	wg.Wait()
	// Every grant's expiry is at most ttl after now: waiting past it from
	// here, not from before the first Acquire, is what makes a tenure
	// that the batch did not renew show up as not held, however long the
	// Acquires took.
	granted := time.Now()
	for i, err := range errs {
		if err != nil {
			failCall(t, fmt.Sprintf("Acquire %d of %d", i, n), err)
		}
	}
	res := renewBatch(t, t.Context(), br, reqs)
	answered := time.Now()
	if len(res) != n {
		t.Fatalf("RenewBatch returned %d results for %d requests", len(res), n)
	}
	for i, r := range res {
		if r.Err != nil {
			s.lateLost(t, fmt.Sprintf("RenewBatch request %d of %d", i, n), reqs[i].Lease, ttl, answered, r.Err)
			failCall(t, fmt.Sprintf("RenewBatch request %d of %d", i, n), r.Err)
		}
	}
	s.waitPast(granted, ttl)
	for i, r := range res {
		s.mustHold(t, l, r.Lease, fmt.Sprintf("past the expiry its grant gave it (%s), after a batch of %d renewed it for %s (tenure %d)", ttl, n, long, i))
	}
}
