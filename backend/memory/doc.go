// Package memory is an in-memory lease.Locker for tests and single-process
// programs, with a clock that tests can move.
//
// It keeps the same contract as every other backend (the conformance suite
// proves it), so a program's tests can swap a real store for memory and
// drive takeover and expiry without sleeping:
//
//	clock := memory.NewManualClock(time.Now())
//	store := memory.New(memory.WithClock(clock))
//	l, _ := store.Acquire(ctx, "report", "worker-1", time.Minute)
//	clock.Advance(time.Minute) // the store now treats l as expired
//
// The clock is the store's clock: it judges expiry and gives Expires and
// HeldError.Remaining. A Lease's Deadline stays on this process's real
// monotonic clock, as on every backend, so advancing a manual clock
// expires a tenure in the store without moving any holder's Deadline.
//
// Importing the package registers the "mem" URL scheme with lease.Open:
// "mem://" opens a new, empty store (it takes no query parameters).
package memory
