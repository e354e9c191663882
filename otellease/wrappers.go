package otellease

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// wrapper is the Locker that Wrap returns, one type whatever it wraps,
// as driver.Locker is one type whatever its store: *core (lease.Locker,
// Unwrap, Shared) and every optional method of this module's Lockers.
// Each passes the call, recorded, to the wrapped Locker's method, or
// fails with an error matching errors.ErrUnsupported that names the
// method and the wrapped Locker's type when that Locker has not got it.
// Can says which work: as lease.Can
// on the wrapped Locker would. So lease.Can, not a type assertion, is how
// to ask a wrapper what it can do, as for every Locker of this module.
//
// Waiting needs no method of the wrapper's: lease.Run passes a waiter's
// place in the line in the context of Acquire, and the wrapper passes
// that context on to the wrapped Locker's Acquire, which takes charge of
// the wait. So a wrapped Locker keeps its woken and fair waiting
// (WithWait, WithFairWait), and every attempt of it is recorded, because
// it is an Acquire.
type wrapper struct{ *core }

var (
	_ lease.Lister        = wrapper{}
	_ lease.ForceReleaser = wrapper{}
	_ driver.Watcher      = wrapper{}
	_ batcher             = wrapper{}
)

// unsupported is the error of an optional method that the wrapped Locker
// has not got.
func (w wrapper) unsupported(method string) error {
	return fmt.Errorf("otellease: %s: the wrapped %T has no %s: %w", method, w.l, method, errors.ErrUnsupported)
}

// List implements lease.Lister through the wrapped Locker's List.
func (w wrapper) List(ctx context.Context, prefix string) ([]lease.Lease, error) {
	if _, ok := w.l.(lease.Lister); !ok {
		return nil, w.unsupported("List")
	}
	return w.list(ctx, prefix)
}

// ForceRelease implements lease.ForceReleaser through the wrapped
// Locker's ForceRelease.
func (w wrapper) ForceRelease(ctx context.Context, name string) (lease.Lease, error) {
	if _, ok := w.l.(lease.ForceReleaser); !ok {
		return lease.Lease{}, w.unsupported("ForceRelease")
	}
	return w.forceRelease(ctx, name)
}

// Watch implements driver.Watcher through the wrapped Locker's Watch.
func (w wrapper) Watch(ctx context.Context, name string) (driver.Watch, error) {
	if _, ok := w.l.(driver.Watcher); !ok {
		return nil, w.unsupported("Watch")
	}
	return w.watch(ctx, name)
}

// RenewBatch renews leases[i] for ttls[i] through the wrapped Locker's
// RenewBatch (see driver.Locker.RenewBatch), recorded as one call; every
// result is an error matching errors.ErrUnsupported when the wrapped
// Locker has none, and Can says so, so that lease.Run renews through
// Renew instead.
func (w wrapper) RenewBatch(ctx context.Context, leases []lease.Lease, ttls []time.Duration) ([]lease.Lease, []error) {
	if _, ok := w.l.(batcher); !ok {
		errs := make([]error, len(leases))
		for i := range errs {
			errs[i] = w.unsupported("RenewBatch")
		}
		return make([]lease.Lease, len(leases)), errs
	}
	return w.renewBatch(ctx, leases, ttls)
}

// alwaysWorks is what a wrapper can always do, whatever it wraps.
type alwaysWorks interface {
	lease.Locker
	Unwrap() lease.Locker
	Shared(key any, make func() any) any
}

// Can answers lease.Can for the wrapper (p is a nil pointer to an
// interface): yes to an interface whose methods the wrapper always makes
// work (lease.Locker's), and otherwise as lease.Can on the
// wrapped Locker would, so that the wrapper tells the truth about the
// store behind it.
func (w wrapper) Can(p any) bool {
	t := reflect.TypeOf(p)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Interface {
		return false
	}
	it := t.Elem()
	if reflect.TypeFor[alwaysWorks]().Implements(it) {
		return true
	}
	if !reflect.TypeOf(w.l).Implements(it) {
		return false
	}
	if c, ok := w.l.(interface{ Can(p any) bool }); ok {
		return c.Can(p)
	}
	return true
}
