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
