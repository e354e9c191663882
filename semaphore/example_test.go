package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/fence"
	"github.com/leasekit/lease/semaphore"
)

// At most two exports at once. Each holder learns its slot, and its
// slot's fencing token; the resource they write to fences each slot
// separately, under the slot's lease name, since tokens increase per
// slot and not across slots.
func Example() {
	locker := memory.New() // or any lease.Locker: lease.Open(ctx, url)
	ctx := context.Background()
	var fences fence.Memory
	write := func(s semaphore.Slot, what string) error {
		return fences.Guard(ctx, s.Lease.Name, s.Lease.Token, func() error { return nil })
	}

	// Two hosts take both slots (by hand here, to keep them).
	a, _ := semaphore.Acquire(ctx, locker, "exports", 2, "host-a", time.Minute)
	b, _ := semaphore.Acquire(ctx, locker, "exports", 2, "host-b", time.Minute)
	fmt.Println("a and b hold different slots:", a.Index != b.Index)
	fmt.Println("a writes:", write(a, "a's export"))
	fmt.Println("b writes:", write(b, "b's export"))

	// A third finds the semaphore full.
	err := semaphore.Run(ctx, locker, "exports", 2, time.Minute, func(context.Context, semaphore.Slot) error { return nil })
	fmt.Println("c is turned away:", errors.Is(err, lease.ErrHeld))

	// a finishes; c, waiting, gets a's slot with a larger token.
	_ = locker.Release(ctx, a.Lease)
	err = semaphore.Run(ctx, locker, "exports", 2, time.Minute, func(ctx context.Context, s semaphore.Slot) error {
		fmt.Printf("c runs in a's slot: %v, with a larger token: %v\n", s.Index == a.Index, s.Lease.Token > a.Lease.Token)
		return write(s, "c's export")
	}, semaphore.WithWait(time.Minute))
	fmt.Println("c:", err)

	// A late write by a, under its old token, is refused; b's slot is
	// fenced on its own, so b still writes.
	fmt.Println("a's late write refused:", errors.Is(write(a, "late"), fence.ErrStale))
	fmt.Println("b writes:", write(b, "more"))
	// Output:
	// a and b hold different slots: true
	// a writes: <nil>
	// b writes: <nil>
	// c is turned away: true
	// c runs in a's slot: true, with a larger token: true
	// c: <nil>
	// a's late write refused: true
	// b writes: <nil>
}

// Holders lists who holds a semaphore's slots, as "lease status --slots"
// shows them. Here the capacity grows from 1 to 2: the first job, under
// N = 1, can only take slot 0; the second, under N = 2, takes slot 1.
func ExampleHolders() {
	locker := memory.New()
	ctx := context.Background()
	_, _ = semaphore.Acquire(ctx, locker, "gpu", 1, "gpu-job-1", time.Minute)
	_, _ = semaphore.Acquire(ctx, locker, "gpu", 2, "gpu-job-2", time.Minute)
	holders, _ := semaphore.Holders(ctx, locker, "gpu", 2)
	for _, s := range holders {
		fmt.Printf("slot %d: %s, lease %q\n", s.Index, s.Lease.Owner, s.Lease.Name)
	}
	// Output:
	// slot 0: gpu-job-1, lease "lease.semaphore/gpu#0"
	// slot 1: gpu-job-2, lease "lease.semaphore/gpu#1"
}
