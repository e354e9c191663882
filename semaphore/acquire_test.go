package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/semaphore"
)

// TestAcquireFillsEverySlotThenReportsFull: n owners get n distinct
// slots, each slot's lease named by the layout; the next owner gets a
// *FullError matching lease.ErrHeld that says when the first slot frees.
func TestAcquireFillsEverySlotThenReportsFull(t *testing.T) {
	store := memory.New()
	ctx := t.Context()
	const n = 4
	seen := map[int]bool{}
	for i := range n {
		s, err := semaphore.Acquire(ctx, store, "exports", n, fmt.Sprintf("owner-%d", i), time.Minute)
		if err != nil {
			t.Fatalf("Acquire %d of %d: %v", i+1, n, err)
		}
		if seen[s.Index] || s.Index < 0 || s.Index >= n {
			t.Fatalf("Acquire %d got slot %d (had %v)", i+1, s.Index, seen)
		}
		seen[s.Index] = true
		if s.Name != "exports" || s.N != n || s.Lease.Name != semaphore.SlotName("exports", s.Index) || s.Lease.Token == 0 || !s.Lease.Valid() {
			t.Errorf("Acquire %d: got %+v", i+1, s)
		}
	}
	_, err := semaphore.Acquire(ctx, store, "exports", n, "latecomer", time.Minute)
	var full *semaphore.FullError
	switch {
	case !errors.Is(err, lease.ErrHeld):
		t.Fatalf("Acquire of a full semaphore: got %v, want an error matching lease.ErrHeld", err)
	case !errors.As(err, &full):
		t.Fatalf("Acquire of a full semaphore: %T is not a *semaphore.FullError", err)
	case full.Name != "exports" || full.N != n || full.Remaining <= 0 || full.Remaining > time.Minute || full.Soonest < 0 || full.Soonest >= n:
		t.Errorf("FullError = %+v", full)
	}
}

// TestStoreErrorsAreNotFull: a store that fails is never reported as a
// full semaphore.
func TestStoreErrorsAreNotFull(t *testing.T) {
	store := memory.New()
	_ = store.Close()
	_, err := semaphore.Acquire(t.Context(), store, "exports", 3, "o", time.Minute)
	if !errors.Is(err, lease.ErrClosed) || errors.Is(err, lease.ErrHeld) {
		t.Errorf("Acquire on a closed Locker: got %v, want an error matching lease.ErrClosed and not lease.ErrHeld", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = semaphore.Run(ctx, memory.New(), "exports", 3, time.Minute, func(context.Context, semaphore.Slot) error { return nil }, semaphore.WithWait(time.Minute))
	if !errors.Is(err, context.Canceled) || errors.Is(err, lease.ErrHeld) {
		t.Errorf("Run with a cancelled context: got %v, want an error matching context.Canceled and not lease.ErrHeld", err)
	}
}

// TestSlotsDoNotMeetOtherNames: a user's own lease named like the
// semaphore, and a semaphore whose name extends another's with '#', are
// other leases.
func TestSlotsDoNotMeetOtherNames(t *testing.T) {
	store := memory.New()
	ctx := t.Context()
	for _, name := range []string{"exports", "exports#0", "lease.semaphore/exports"} {
		if _, err := store.Acquire(ctx, name, "user", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	a, err := semaphore.Acquire(ctx, store, "exports", 1, "a", time.Minute)
	if err != nil {
		t.Fatalf("Acquire of exports: %v", err)
	}
	b, err := semaphore.Acquire(ctx, store, "exports#0", 1, "b", time.Minute)
	if err != nil {
		t.Fatalf("Acquire of exports#0: %v", err)
	}
	got, err := semaphore.Holders(ctx, store, "exports", 0)
	if err != nil || len(got) != 1 || got[0].Lease.Owner != "a" || got[0].Index != 0 {
		t.Errorf("Holders(exports) = %+v, %v; want a's slot 0 only", got, err)
	}
	got, err = semaphore.Holders(ctx, store, "exports#0", 0)
	if err != nil || len(got) != 1 || got[0].Lease.Owner != "b" {
		t.Errorf("Holders(exports#0) = %+v, %v; want b's slot 0 only", got, err)
	}
	if a.Lease.Name == b.Lease.Name {
		t.Errorf("two semaphores share the lease %q", a.Lease.Name)
	}
}

// noList hides the memory Locker's List, as a store without one.
type noList struct{ lease.Locker }

// TestHolders lists a semaphore's holders by slot, with List and, on a
// Locker without it, by inspecting each slot below n; holders above n
// (started under a larger capacity) show only where the store lists.
func TestHolders(t *testing.T) {
	store := memory.New()
	ctx := t.Context()
	for i := range 3 {
		if _, err := semaphore.Acquire(ctx, store, "gpu", 3, fmt.Sprintf("job-%d", i), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	listed, err := semaphore.Holders(ctx, store, "gpu", 0)
	if err != nil || len(listed) != 3 {
		t.Fatalf("Holders with List: %+v, %v", listed, err)
	}
	for i, s := range listed {
		if s.Index != i || s.Lease.Name != semaphore.SlotName("gpu", i) || s.Lease.Owner == "" {
			t.Errorf("holder %d: %+v", i, s)
		}
	}
	inspected, err := semaphore.Holders(ctx, noList{store}, "gpu", 2)
	if err != nil || len(inspected) != 2 || inspected[0].Index != 0 || inspected[1].Index != 1 {
		t.Errorf("Holders by Inspect below 2: %+v, %v", inspected, err)
	}
	if _, err := semaphore.Holders(ctx, noList{store}, "gpu", 0); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Holders without List or capacity: got %v, want lease.ErrInvalid", err)
	}
}
