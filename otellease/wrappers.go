package otellease

import (
	"context"

	"github.com/leasekit/lease"
)

// A wrapper implements an optional interface exactly when the Locker it
// wraps does, so that a type assertion on the wrapper answers as one on
// the Locker would. Each optional method lives in a small type of its own;
// the wrapper types below embed *core (lease.Locker and Unwrap) and one of
// each for the interfaces the wrapped Locker has: one type per
// combination of the four, named by their initials (L Lister, F
// ForceReleaser, B BatchRenewer, W Waiter).

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

type (
	wrapper  struct{ *core }
	wrapperL struct {
		*core
		lister
	}
	wrapperF struct {
		*core
		forceReleaser
	}
	wrapperLF struct {
		*core
		lister
		forceReleaser
	}
	wrapperB struct {
		*core
		batchRenewer
	}
	wrapperLB struct {
		*core
		lister
		batchRenewer
	}
	wrapperFB struct {
		*core
		forceReleaser
		batchRenewer
	}
	wrapperLFB struct {
		*core
		lister
		forceReleaser
		batchRenewer
	}
	wrapperW struct {
		*core
		waiter
	}
	wrapperLW struct {
		*core
		lister
		waiter
	}
	wrapperFW struct {
		*core
		forceReleaser
		waiter
	}
	wrapperLFW struct {
		*core
		lister
		forceReleaser
		waiter
	}
	wrapperBW struct {
		*core
		batchRenewer
		waiter
	}
	wrapperLBW struct {
		*core
		lister
		batchRenewer
		waiter
	}
	wrapperFBW struct {
		*core
		forceReleaser
		batchRenewer
		waiter
	}
	wrapperLFBW struct {
		*core
		lister
		forceReleaser
		batchRenewer
		waiter
	}
)

// The bits of a combination.
const (
	hasLister = 1 << iota
	hasForceReleaser
	hasBatchRenewer
	hasWaiter
)

// wrappers makes the wrapper for each combination, indexed by its bits.
var wrappers = [16]func(c *core) lease.Locker{
	0:                                  func(c *core) lease.Locker { return &wrapper{c} },
	hasLister:                          func(c *core) lease.Locker { return &wrapperL{c, lister{c}} },
	hasForceReleaser:                   func(c *core) lease.Locker { return &wrapperF{c, forceReleaser{c}} },
	hasLister | hasForceReleaser:       func(c *core) lease.Locker { return &wrapperLF{c, lister{c}, forceReleaser{c}} },
	hasBatchRenewer:                    func(c *core) lease.Locker { return &wrapperB{c, batchRenewer{c}} },
	hasLister | hasBatchRenewer:        func(c *core) lease.Locker { return &wrapperLB{c, lister{c}, batchRenewer{c}} },
	hasForceReleaser | hasBatchRenewer: func(c *core) lease.Locker { return &wrapperFB{c, forceReleaser{c}, batchRenewer{c}} },
	hasLister | hasForceReleaser | hasBatchRenewer: func(c *core) lease.Locker { return &wrapperLFB{c, lister{c}, forceReleaser{c}, batchRenewer{c}} },
	hasWaiter:                                      func(c *core) lease.Locker { return &wrapperW{c, waiter{c}} },
	hasLister | hasWaiter:                          func(c *core) lease.Locker { return &wrapperLW{c, lister{c}, waiter{c}} },
	hasForceReleaser | hasWaiter:                   func(c *core) lease.Locker { return &wrapperFW{c, forceReleaser{c}, waiter{c}} },
	hasLister | hasForceReleaser | hasWaiter:       func(c *core) lease.Locker { return &wrapperLFW{c, lister{c}, forceReleaser{c}, waiter{c}} },
	hasBatchRenewer | hasWaiter:                    func(c *core) lease.Locker { return &wrapperBW{c, batchRenewer{c}, waiter{c}} },
	hasLister | hasBatchRenewer | hasWaiter:        func(c *core) lease.Locker { return &wrapperLBW{c, lister{c}, batchRenewer{c}, waiter{c}} },
	hasForceReleaser | hasBatchRenewer | hasWaiter: func(c *core) lease.Locker { return &wrapperFBW{c, forceReleaser{c}, batchRenewer{c}, waiter{c}} },
	hasLister | hasForceReleaser | hasBatchRenewer | hasWaiter: func(c *core) lease.Locker {
		return &wrapperLFBW{c, lister{c}, forceReleaser{c}, batchRenewer{c}, waiter{c}}
	},
}

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
	return wrappers[bits](c)
}
