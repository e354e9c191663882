package otellease

import (
	"context"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

//go:generate go test -run TestGeneratedFilesAreCurrent -update

// A wrapper implements an optional interface exactly when the Locker it
// wraps does, so that a type assertion on the wrapper answers as one on
// the Locker would. The optional interfaces a wrapper keeps are
// lease.Lister, lease.ForceReleaser, driver.Watcher, and RenewBatch
// (driver.Locker's, which lease.Run renews through).
//
// Waiting needs none of them and no method of the wrapper's: lease.Run
// passes a waiter's place in the line in the context of Acquire, and the
// wrapper passes that context on to the wrapped Locker's Acquire, which
// takes charge of the wait. So a wrapped Locker keeps its woken and fair
// waiting (WithWait, WithFairWait), and every attempt of it is recorded,
// because it is an Acquire.
//
// Each optional interface's method lives in a small type of its own
// below; the wrapper types in wrappers_gen.go embed *core (lease.Locker
// and Unwrap) and one of these for each interface the wrapped Locker has:
// one type per combination of the four, named by their initials (L
// Lister, F ForceReleaser, B RenewBatch, W Watcher). gen_test.go writes
// that file.

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

// RenewBatch renews leases[i] for ttls[i] through the wrapped Locker's
// RenewBatch (see driver.Locker.RenewBatch), traced as one call.
func (m batchRenewer) RenewBatch(ctx context.Context, leases []lease.Lease, ttls []time.Duration) ([]lease.Lease, []error) {
	return m.c.renewBatch(ctx, leases, ttls)
}

type waiter struct{ c *core }

// Watch implements driver.Watcher.
func (m waiter) Watch(ctx context.Context, name string) (driver.Watch, error) {
	return m.c.watch(ctx, name)
}

// The bits of a combination, which index wrappers.
const (
	hasLister = 1 << iota
	hasForceReleaser
	hasBatchRenewer
	hasWaiter
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
	if _, ok := l.(batcher); ok {
		bits |= hasBatchRenewer
	}
	if _, ok := l.(driver.Watcher); ok {
		bits |= hasWaiter
	}
	return wrappers[bits](c)
}
