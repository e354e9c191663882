package lease

import (
	"context"
	"time"
)

// Lister is implemented by Lockers that can list the current tenures, for
// operators and the lease command's "list".
type Lister interface {
	// List returns the unexpired tenures whose names start with prefix
	// (all of them for ""), sorted by name, as Inspect would return them.
	List(ctx context.Context, prefix string) ([]Lease, error)
}

// ForceReleaser is implemented by Lockers that let an operator end a
// tenure without being its owner, for clearing a stuck lease.
type ForceReleaser interface {
	// ForceRelease ends the current tenure of name, whoever holds it, and
	// returns it. It returns an error matching ErrNotHeld when nobody holds
	// name. Token order is kept: the next tenure gets a larger token.
	ForceRelease(ctx context.Context, name string) (Lease, error)
}

// BatchRenewer is implemented by Lockers that renew many tenures at once,
// in a number of round trips that does not grow with the batch (one
// statement, one script per hash slot). Run renews through it: the Runs
// that share a Locker share one renewer, which coalesces the renewals
// that fall due together into one call. Every Locker of this module
// implements it.
type BatchRenewer interface {
	// RenewBatch renews each request's Lease for its TTL, exactly as Renew
	// would, and returns one result per request, in order. A result's Err
	// is nil when that tenure was renewed (Lease then has its new Expires
	// and Deadline), matches ErrLost when it was not intact (nothing was
	// changed), matches ErrInvalid for a malformed request, and is the
	// store's error otherwise (often the same for every request, when the
	// call as a whole failed).
	RenewBatch(ctx context.Context, reqs []RenewRequest) []RenewResult
}

// RenewRequest asks BatchRenewer.RenewBatch to renew Lease for TTL.
type RenewRequest struct {
	Lease Lease
	TTL   time.Duration
}

// RenewResult is the outcome of one RenewRequest: the renewed Lease, or
// the error Renew would have returned.
type RenewResult struct {
	Lease Lease
	Err   error
}

// Waiter is implemented by Lockers whose store can say when a name may
// have become free (PostgreSQL LISTEN/NOTIFY, Redis pub/sub, an etcd
// watch), so that a caller waiting for a busy name wakes when it is
// released instead of polling. Run's WithWait uses it when the Locker has
// it; Lockers without it are polled.
type Waiter interface {
	// Watch starts watching name and returns once the watch is in place,
	// so that no release after Watch returns goes unnoticed while the
	// store's connection holds. The Watch's Changed channel then receives
	// whenever the tenure of name may have ended: released, force-released
	// or, where the store says so, expired. A wake-up is a hint, never a
	// grant: Acquire decides. The Watch lasts until Stop or until ctx
	// ends. It returns an error matching errors.ErrUnsupported when the
	// store cannot watch after all.
	Watch(ctx context.Context, name string) (Watch, error)
}

// Watch is a watch on one name, from Waiter.Watch.
type Watch interface {
	// Changed receives a value, at most one buffered, whenever the watched
	// name may have become free. It is never closed.
	Changed() <-chan struct{}
	// Stop ends the watch and releases what it holds. It is safe to call
	// more than once.
	Stop()
}

// Can reports whether l can do what the optional interface I promises (I
// is Lister, ForceReleaser, Waiter or BatchRenewer), as its store can. A
// type assertion says which methods a Locker has; Can says whether they
// work: the SQL backend's Locker has Watch on every database, but only
// PostgreSQL with a Listener can watch. Can is true when l implements I
// and, when l has a method Can(p any) bool (every Locker of this module,
// and wrappers such as otellease, which pass the question on), that
// method says yes to a nil *I.
func Can[I any](l Locker) bool {
	if _, ok := l.(I); !ok {
		return false
	}
	if c, ok := l.(interface{ Can(p any) bool }); ok {
		return c.Can((*I)(nil))
	}
	return true
}
