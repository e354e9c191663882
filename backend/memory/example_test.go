package memory_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
)

// A test drives takeover with the manual clock instead of sleeping.
func ExampleManualClock() {
	ctx := context.Background()
	clock := memory.NewManualClock(time.Now())
	store := memory.New(memory.WithClock(clock))

	first, _ := store.Acquire(ctx, "report", "worker-1", time.Minute)
	_, err := store.Acquire(ctx, "report", "worker-2", time.Minute)
	fmt.Println("while held:", errors.Is(err, lease.ErrHeld))

	clock.Advance(time.Minute) // worker-1 stalls past its ttl
	second, err := store.Acquire(ctx, "report", "worker-2", time.Minute)
	fmt.Println("after expiry:", err, "token grew:", second.Token > first.Token)

	err = store.Release(ctx, first)
	fmt.Println("stale release:", errors.Is(err, lease.ErrLost))
	// Output:
	// while held: true
	// after expiry: <nil> token grew: true
	// stale release: true
}

// Share gives a second Locker on the same store, as a second process would
// have, for tests of code that opens its own Locker.
func ExampleLocker_Share() {
	ctx := context.Background()
	a := memory.New()
	b := a.Share()
	defer a.Close()
	defer b.Close()

	if _, err := a.Acquire(ctx, "job", "process-a", time.Minute); err != nil {
		panic(err)
	}
	_, err := b.Acquire(ctx, "job", "process-b", time.Minute)
	var held *lease.HeldError
	if errors.As(err, &held) {
		fmt.Println("held by", held.Owner)
	}
	// Output: held by process-a
}
