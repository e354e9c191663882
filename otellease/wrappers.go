package otellease

import (
	"context"
	"time"

	"github.com/leasekit/lease"
)

//go:generate go test -run TestGeneratedFilesAreCurrent -update

// A wrapper implements an optional interface exactly when the Locker it
// wraps does, so that a type assertion on the wrapper answers as one on
// the Locker would (lease.Run's WithFairWait, for one, refuses a Locker
// that is not a FairAcquirer). Each optional interface's methods live in a
// small type of its own below; the wrapper types in wrappers_gen.go embed
// *core (lease.Locker and Unwrap) and one of these for each interface the
// wrapped Locker has: one type per combination of the six, named by
// their initials (L Lister, F ForceReleaser, B BatchRenewer, W Waiter, Q
// FairAcquirer, the queue, T TurnWaiter's own methods). gen_test.go writes that file.

type lister struct{ c *core }

// List implements lease.Lister.
func (m lister) List(ctx context.Context, prefix string) ([]lease.Lease, error) {
	return m.c.list(ctx, prefix)
}

type forceReleaser struct{ c *core }

// ForceRelease implements lease.ForceReleaser.
func (m forceReleaser) ForceRelease(ctx context.Context, name string) (lease.Lease, error) {
	return m.c.forceRelease(ctx, name)
}

type batchRenewer struct{ c *core }

// RenewBatch implements lease.BatchRenewer.
func (m batchRenewer) RenewBatch(ctx context.Context, reqs []lease.RenewRequest) []lease.RenewResult {
	return m.c.renewBatch(ctx, reqs)
}

type waiter struct{ c *core }

// Watch implements lease.Waiter.
func (m waiter) Watch(ctx context.Context, name string) (lease.Watch, error) {
	return m.c.watch(ctx, name)
}

type fairAcquirer struct{ c *core }

// AcquireQueued implements lease.FairAcquirer.
func (m fairAcquirer) AcquireQueued(ctx context.Context, name, owner string, ttl, place time.Duration) (lease.Lease, error) {
	return m.c.acquireQueued(ctx, name, owner, ttl, place)
}

// Dequeue implements lease.FairAcquirer.
func (m fairAcquirer) Dequeue(ctx context.Context, name, owner string) error {
	return m.c.dequeue(ctx, name, owner)
}

// turnWaiter has lease.TurnWaiter's own methods; with waiter's Watch, a
// wrapper that has both is a lease.TurnWaiter.
type turnWaiter struct{ c *core }

// WatchTurn implements lease.TurnWaiter.
func (m turnWaiter) WatchTurn(ctx context.Context, name string) (lease.Watch, error) {
	return m.c.watchTurn(ctx, name)
}

// AcquireOrWait implements lease.TurnWaiter.
func (m turnWaiter) AcquireOrWait(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	return m.c.acquireOrWait(ctx, name, owner, ttl)
}

// turnMethods is what turnWaiter adds: a Locker with them and Watch is a
// lease.TurnWaiter.
type turnMethods interface {
	WatchTurn(ctx context.Context, name string) (lease.Watch, error)
	AcquireOrWait(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error)
}

// The bits of a combination, which index wrappers.
const (
	hasLister = 1 << iota
	hasForceReleaser
	hasBatchRenewer
	hasWaiter
	hasFairAcquirer
	hasTurnWaiter
	numCombinations = 1 << iota
)

// wrapperFor returns c in the wrapper type that has the optional
// interfaces l has.
func wrapperFor(l lease.Locker, c *core) lease.Locker {
	bits := 0
	if _, ok := l.(lease.Lister); ok {
		bits |= hasLister
	}
	if _, ok := l.(lease.ForceReleaser); ok {
		bits |= hasForceReleaser
	}
	if _, ok := l.(lease.BatchRenewer); ok {
		bits |= hasBatchRenewer
	}
	if _, ok := l.(lease.Waiter); ok {
		bits |= hasWaiter
	}
	if _, ok := l.(lease.FairAcquirer); ok {
		bits |= hasFairAcquirer
	}
	if _, ok := l.(turnMethods); ok {
		bits |= hasTurnWaiter
	}
	return wrappers[bits](c)
}
