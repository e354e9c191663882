package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/semaphore"
)

// TestRunGivesTheWorkItsSlot: the work learns its slot and its lease
// (also through lease.FromContext), and the slot is released after it.
func TestRunGivesTheWorkItsSlot(t *testing.T) {
	store := memory.New()
	ctx := t.Context()
	var got semaphore.Slot
	err := semaphore.Run(ctx, store, "exports", 4, time.Minute, func(ctx context.Context, s semaphore.Slot) error {
		got = s
		held, ok := lease.FromContext(ctx)
		if !ok || held.Name != s.Lease.Name || held.Token != s.Lease.Token {
			t.Errorf("lease.FromContext = %v, %v; want the slot's lease %v", held, ok, s.Lease)
		}
		return nil
	}, semaphore.WithOwner("worker-1"))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got.Name != "exports" || got.N != 4 || got.Index < 0 || got.Index >= 4 || got.Lease.Owner != "worker-1" || got.Lease.Name != semaphore.SlotName("exports", got.Index) {
		t.Errorf("the work got %+v", got)
	}
	if _, err := store.Inspect(ctx, got.Lease.Name); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("after Run, Inspect of the slot: got %v, want lease.ErrNotHeld", err)
	}
}

// TestRunOnAFullSemaphore returns the *FullError without calling fn, and
// returns fn's error, unchanged, when it ran.
func TestRunOnAFullSemaphore(t *testing.T) {
	store := memory.New()
	ctx := t.Context()
	if _, err := semaphore.Acquire(ctx, store, "gpu", 1, "other", time.Minute); err != nil {
		t.Fatal(err)
	}
	called := false
	err := semaphore.Run(ctx, store, "gpu", 1, time.Minute, func(context.Context, semaphore.Slot) error { called = true; return nil })
	var full *semaphore.FullError
	if !errors.As(err, &full) || !errors.Is(err, lease.ErrHeld) || called {
		t.Errorf("Run on a full semaphore: got %v (fn called: %v), want a *FullError and no call", err, called)
	}
	boom := errors.New("boom")
	if err := semaphore.Run(ctx, store, "gpu", 2, time.Minute, func(context.Context, semaphore.Slot) error { return boom }); !errors.Is(err, boom) || errors.Is(err, lease.ErrHeld) {
		t.Errorf("Run returned %v, want fn's error", err)
	}
}

// TestWaiterWakesOnReleaseOfAnySlot: a waiter on a full semaphore of
// three is woken by the release of slot 1 (the store's notification, not
// a timer: no time passes on the bubble's clock), tries that slot first
// and gets it in one Acquire.
func TestWaiterWakesOnReleaseOfAnySlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		ctx := t.Context()
		const n = 3
		held := make([]semaphore.Slot, n)
		for i := range n {
			s, err := semaphore.Acquire(ctx, store, "exports", n, fmt.Sprintf("holder-%d", i), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			held[s.Index] = s
		}
		waiter := &counting{Locker: store.Share()}
		got := make(chan semaphore.Slot, 1)
		start := time.Now()
		var woke time.Time
		done := make(chan error, 1)
		go func() {
			done <- semaphore.Run(ctx, waiter, "exports", n, time.Minute, func(ctx context.Context, s semaphore.Slot) error {
				woke = time.Now()
				got <- s
				return nil
			}, semaphore.WithWait(time.Hour))
		}()
		synctest.Wait() // the waiter found every slot held and watches them
		before := waiter.acquires.Load()
		if before != 2*n {
			t.Errorf("the waiter made %d Acquires before waiting; want %d (a scan, then another once its watches were in place)", before, 2*n)
		}
		if err := store.Release(ctx, held[1].Lease); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		s := <-got
		if s.Index != 1 || s.Lease.Token <= held[1].Lease.Token {
			t.Errorf("the waiter got slot %d token %d; want slot 1 with a token above %d", s.Index, s.Lease.Token, held[1].Lease.Token)
		}
		if d := woke.Sub(start); d != 0 {
			t.Errorf("the waiter got its slot %s after it started waiting on the bubble's clock; want at once, woken by the release", d)
		}
		if after := waiter.acquires.Load() - before; after != 1 {
			t.Errorf("the waiter made %d Acquires after the release; want 1, of the released slot", after)
		}
	})
}

// TestPollingWaiterGetsAnExpiredSlot: on a Locker that cannot watch, a
// waiter polls, and gets the slot of a holder that stopped renewing once
// its tenure expires.
func TestPollingWaiterGetsAnExpiredSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		ctx := t.Context()
		crashed, err := semaphore.Acquire(ctx, store, "exports", 1, "crashed", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var got semaphore.Slot
		err = semaphore.Run(ctx, noList{store}, "exports", 1, time.Minute, func(ctx context.Context, s semaphore.Slot) error {
			got = s
			return nil
		}, semaphore.WithWait(time.Minute))
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if waited := time.Since(start); waited < 10*time.Second || got.Lease.Token <= crashed.Lease.Token {
			t.Errorf("the waiter got slot %d token %d after %s; want it after the 10s tenure expired, with a token above %d", got.Index, got.Lease.Token, waited, crashed.Lease.Token)
		}
	})
}

// TestLostSlotCancelsTheWork: when the slot's lease is taken away (an
// operator's ForceRelease), the next renewal finds it lost, the work's
// context is cancelled with a cause matching lease.ErrLost, and Run says
// so.
func TestLostSlotCancelsTheWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		ctx := t.Context()
		var cause error
		err := semaphore.Run(ctx, store, "exports", 2, 3*time.Second, func(ctx context.Context, s semaphore.Slot) error {
			if _, err := store.ForceRelease(ctx, s.Lease.Name); err != nil {
				t.Errorf("ForceRelease: %v", err)
			}
			<-ctx.Done()
			cause = context.Cause(ctx)
			return nil
		})
		if !errors.Is(cause, lease.ErrLost) || !errors.Is(err, lease.ErrLost) {
			t.Errorf("the work's cause %v and Run's error %v; want both to match lease.ErrLost", cause, err)
		}
	})
}

// TestCapacityChange: holders under N = 4 keep slots 2 and 3; a caller
// under N = 2 takes only slots 0 and 1 (full while they are held, even
// with slot 3 free); a caller under N = 6 takes slots above 3.
func TestCapacityChange(t *testing.T) {
	store := memory.New()
	ctx := t.Context()
	old := map[int]semaphore.Slot{}
	for i := range 4 {
		s, err := semaphore.Acquire(ctx, store, "exports", 4, fmt.Sprintf("old-%d", i), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		old[s.Index] = s
	}
	if err := store.Release(ctx, old[3].Lease); err != nil {
		t.Fatal(err)
	}
	if _, err := semaphore.Acquire(ctx, store, "exports", 2, "new-a", time.Minute); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("N = 2 with slots 0 and 1 held: got %v, want lease.ErrHeld", err)
	}
	if err := store.Release(ctx, old[1].Lease); err != nil {
		t.Fatal(err)
	}
	s, err := semaphore.Acquire(ctx, store, "exports", 2, "new-a", time.Minute)
	if err != nil || s.Index != 1 {
		t.Fatalf("N = 2 with slot 1 free: got slot %d, %v; want slot 1", s.Index, err)
	}
	for i := range 3 {
		s, err := semaphore.Acquire(ctx, store, "exports", 6, fmt.Sprintf("bigger-%d", i), time.Minute)
		if err != nil || s.Index < 3 {
			t.Fatalf("N = 6: got slot %d, %v; want one of 3 to 5", s.Index, err)
		}
	}
	all, err := semaphore.Holders(ctx, store, "exports", 0)
	if err != nil || len(all) != 6 {
		t.Errorf("Holders: %d, %v; want 6 (max N)", len(all), err)
	}
}
