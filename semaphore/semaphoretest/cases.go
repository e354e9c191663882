package semaphoretest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/semaphore"
)

// atMostN: six holders, each on its own Locker, take three turns each at
// a semaphore of three slots (Run with WithWait, holding a fifth of the
// ttl); the ledger sees never more than three at once, never two on one
// slot, and each slot's tokens strictly increasing. A slot lost because a
// renewal did not land in time (a slow store) is logged: the ledger
// judges it.
func atMostN(ctx context.Context, t testing.TB, s *suite) {
	name := s.name("at-most-n")
	const n, holders, rounds = 3, 6, 3
	g := &ledger{}
	var wg sync.WaitGroup
	for i := range holders {
		l := s.locker(t)
		who := fmt.Sprintf("holder-%d", i)
		wg.Go(func() {
			for range rounds {
				err := semaphore.Run(ctx, l, name, n, s.h.TTL, g.work(who, holdFor(s.h.TTL/5)), semaphore.WithWait(s.h.Timeout))
				switch {
				case ctx.Err() != nil:
					return
				case errors.Is(err, lease.ErrLost):
					t.Logf("%s: a slot was lost: %v", who, err)
				case err != nil:
					t.Errorf("%s: Run: %v", who, err)
					return
				}
			}
		})
	}
	wg.Wait()
	spans := g.check(t, n)
	if ctx.Err() != nil {
		t.Fatalf("only %d of %d turns were taken before the case's timeout", len(spans), holders*rounds)
	}
	used := map[int]int{}
	for _, sp := range spans {
		used[sp.slot]++
	}
	if len(spans) != holders*rounds || len(used) < 2 {
		t.Errorf("%d turns on slots %v; want %d turns on at least 2 slots", len(spans), used, holders*rounds)
	}
	most, _ := maxOverlap(spans)
	t.Logf("%d turns, at most %d at once, per slot %v", len(spans), most, used)
}

// tokensIncrease: four rounds, each taking every slot of a semaphore of
// two by hand (Acquire, as distinct owners) and releasing them; each
// round gets both slots, and each slot's token grows every round.
func tokensIncrease(ctx context.Context, t testing.TB, s *suite) {
	name := s.name("tokens")
	const n, rounds = 2, 4
	l1, l2 := s.locker(t), s.locker(t)
	last := map[int]uint64{}
	for r := range rounds {
		var got []semaphore.Slot
		for i, l := range []lease.Locker{l1, l2} {
			sl, err := semaphore.Acquire(ctx, l, name, n, fmt.Sprintf("round-%d-owner-%d", r, i), s.h.TTL)
			if err != nil {
				t.Fatalf("round %d: Acquire %d of a free semaphore of %d: %v", r, i+1, n, err)
			}
			got = append(got, sl)
		}
		if got[0].Index == got[1].Index {
			t.Fatalf("round %d: two owners were both given slot %d", r, got[0].Index)
		}
		for i, sl := range got {
			if prev, ok := last[sl.Index]; ok && sl.Lease.Token <= prev {
				t.Errorf("round %d: slot %d got token %d after token %d: tokens must strictly increase per slot", r, sl.Index, sl.Lease.Token, prev)
			}
			last[sl.Index] = sl.Lease.Token
			if err := []lease.Locker{l1, l2}[i].Release(ctx, sl.Lease); err != nil {
				t.Fatalf("round %d: Release slot %d: %v", r, sl.Index, err)
			}
		}
	}
	t.Logf("last tokens per slot: %v", last)
}

// crashedSlotFrees: of two slots, one is held for long and the other by
// a holder whose Locker is then closed without releasing (a crash); a
// waiter gets the crashed holder's slot within the ttl plus the expiry
// lag (and a slack), never before the crashed holder's Deadline, with a
// larger token.
func crashedSlotFrees(ctx context.Context, t testing.TB, s *suite) {
	name := s.name("crash")
	const n = 2
	bound := s.h.freeBound()
	la, lb, lc := s.locker(t), s.locker(t), s.locker(t)
	b, err := semaphore.Acquire(ctx, lb, name, n, "keeper", 3*bound)
	if err != nil {
		t.Fatalf("Acquire (keeper): %v", err)
	}
	defer func() { _ = lb.Release(context.WithoutCancel(ctx), b.Lease) }()
	a, err := semaphore.Acquire(ctx, la, name, n, "crasher", s.h.TTL)
	if err != nil {
		t.Fatalf("Acquire (crasher): %v", err)
	}
	crashed := time.Now()
	if err := la.Close(); err != nil {
		t.Logf("closing the crashed holder's Locker: %v", err)
	}
	var got semaphore.Slot
	var at time.Time
	err = semaphore.Run(ctx, lc, name, n, s.h.TTL, func(ctx context.Context, sl semaphore.Slot) error {
		at, got = time.Now(), sl
		return nil
	}, semaphore.WithWait(bound))
	switch {
	case errors.Is(err, lease.ErrHeld):
		t.Fatalf("the crashed holder's slot %d was not free within %s (the ttl %s, the expiry lag %s and a slack): %v", a.Index, bound, s.h.TTL, s.h.ExpiryLag, err)
	case err != nil:
		t.Fatalf("Run (waiter): %v", err)
	}
	if got.Index != a.Index {
		t.Errorf("the waiter got slot %d; the only free one was the crashed holder's slot %d", got.Index, a.Index)
	}
	if at.Before(a.Lease.Deadline) {
		t.Errorf("the waiter got slot %d %s before the crashed holder's Deadline", got.Index, a.Lease.Deadline.Sub(at))
	}
	if got.Lease.Token <= a.Lease.Token {
		t.Errorf("slot %d: token %d after the crashed holder's token %d: tokens must strictly increase per slot", got.Index, got.Lease.Token, a.Lease.Token)
	}
	t.Logf("slot %d freed %s after the crash (ttl %s)", got.Index, at.Sub(crashed).Round(time.Millisecond), s.h.TTL)
}

// waiterGetsFreedSlot: both slots of two are held for long; a waiter
// (Run with WithWait) gets the slot that one holder releases, long
// before either holder's tenure could have expired.
func waiterGetsFreedSlot(ctx context.Context, t testing.TB, s *suite) {
	name := s.name("waiter")
	const n = 2
	bound := s.h.freeBound()
	la, lb, lw := s.locker(t), s.locker(t), s.locker(t)
	a, err := semaphore.Acquire(ctx, la, name, n, "holder-a", 3*bound)
	if err != nil {
		t.Fatalf("Acquire (a): %v", err)
	}
	b, err := semaphore.Acquire(ctx, lb, name, n, "holder-b", 3*bound)
	if err != nil {
		t.Fatalf("Acquire (b): %v", err)
	}
	defer func() { _ = lb.Release(context.WithoutCancel(ctx), b.Lease) }()

	type outcome struct {
		sl  semaphore.Slot
		err error
	}
	done := make(chan outcome, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	wg.Go(func() {
		var got semaphore.Slot
		err := semaphore.Run(ctx, lw, name, n, s.h.TTL, func(ctx context.Context, sl semaphore.Slot) error {
			got = sl
			return nil
		}, semaphore.WithWait(bound))
		done <- outcome{got, err}
	})
	sleepCtx(ctx, s.h.TTL/2) // let the waiter find the semaphore full
	if err := la.Release(ctx, a.Lease); err != nil {
		t.Errorf("Release (a): %v", err)
	}
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		t.Fatalf("the waiter did not return: %v", ctx.Err())
	}
	switch {
	case errors.Is(o.err, lease.ErrHeld):
		t.Fatalf("the waiter did not get slot %d, released %s before it gave up: %v", a.Index, bound, o.err)
	case o.err != nil:
		t.Fatalf("Run (waiter): %v", o.err)
	}
	if o.sl.Index != a.Index {
		t.Errorf("the waiter got slot %d; the only free one was the released slot %d", o.sl.Index, a.Index)
	}
	if o.sl.Lease.Token <= a.Lease.Token {
		t.Errorf("slot %d: token %d after token %d: tokens must strictly increase per slot", o.sl.Index, o.sl.Lease.Token, a.Lease.Token)
	}
}

// capacityChanges: four holders under N = 4 hold every slot; a caller
// under N = 2 finds the semaphore full; three waiters under N = 2 wait
// while the four keep their slots for more than two ttls, renewing; the
// four then end one by one. The four keep their slots until they end
// (none is lost), the waiters only ever take slots 0 and 1, and there are
// never more than four holders, nor two on one slot.
func capacityChanges(ctx context.Context, t testing.TB, s *suite) {
	name := s.name("capacity")
	g := &ledger{}
	const big, small, waiters = 4, 2, 3
	release := make([]chan struct{}, big)
	started := make(chan int, big)
	olds := make([]chan error, big)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	for i := range big {
		release[i] = make(chan struct{})
		olds[i] = make(chan error, 1)
	}
	for i := range big {
		l := s.locker(t)
		who := fmt.Sprintf("old-%d", i)
		wg.Go(func() {
			olds[i] <- semaphore.Run(ctx, l, name, big, s.h.TTL, g.work(who, func(ctx context.Context, sl semaphore.Slot) {
				started <- sl.Index
				select {
				case <-release[sl.Index]:
				case <-ctx.Done():
				}
			}), semaphore.WithWait(s.h.Timeout))
		})
	}
	for range big {
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatalf("the holders under N = %d did not all start: %v", big, ctx.Err())
		}
	}
	if _, err := semaphore.Acquire(ctx, s.locker(t), name, small, "newcomer", s.h.TTL); !errors.Is(err, lease.ErrHeld) {
		t.Errorf("Acquire under N = %d while %d holders under N = %d hold every slot: got %v, want an error matching lease.ErrHeld", small, big, big, err)
	}
	news := make(chan error, waiters)
	for i := range waiters {
		l := s.locker(t)
		who := fmt.Sprintf("new-%d", i)
		wg.Go(func() {
			news <- semaphore.Run(ctx, l, name, small, s.h.TTL, g.work(who, holdFor(s.h.TTL/5)), semaphore.WithWait(s.h.Timeout))
		})
	}
	// The old holders keep their slots, renewing, while the new ones wait.
	sleepCtx(ctx, 2*s.h.TTL+s.h.TTL/2)
	for _, i := range []int{0, 3, 1, 2} {
		close(release[i])
		sleepCtx(ctx, s.h.TTL/5)
	}
	for i := range big {
		select {
		case err := <-olds[i]:
			if err != nil {
				t.Errorf("a holder under N = %d did not keep its slot until it ended: %v", big, err)
			}
		case <-ctx.Done():
			t.Fatalf("a holder under N = %d did not return: %v", big, ctx.Err())
		}
	}
	for range waiters {
		select {
		case err := <-news:
			if err != nil {
				t.Errorf("a holder under N = %d: %v", small, err)
			}
		case <-ctx.Done():
			t.Fatalf("a waiter under N = %d did not return: %v", small, ctx.Err())
		}
	}
	spans := g.check(t, big)
	if len(spans) != big+waiters {
		t.Errorf("%d holders; want %d", len(spans), big+waiters)
	}
}

// holdFor returns a hold that lasts d, or until the work's ctx ends.
func holdFor(d time.Duration) func(ctx context.Context, _ semaphore.Slot) {
	return func(ctx context.Context, _ semaphore.Slot) { sleepCtx(ctx, d) }
}

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
