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

// FairAcquirer is implemented by Lockers whose store can keep the owners
// waiting for a name in arrival order, so that a busy name goes to its
// waiters first come, first served. Run's WithFairWait uses it.
//
// Fairness binds the waiters that queue: a plain Acquire of a free name
// still succeeds, ahead of the queue.
type FairAcquirer interface {
	// AcquireQueued is Acquire for an owner waiting its turn. If owner is
	// not in name's queue it joins at the back; either way its place
	// lasts until now+place by the store's clock, so a waiter that dies
	// holds up the others for at most place. It starts (or re-enters) a
	// tenure, as Acquire would, only when owner holds name already, or
	// name is free and owner is first among the unexpired places; owner
	// then leaves the queue. Otherwise it returns a *HeldError naming the
	// holder, or, when name is free but another waiter is ahead, that
	// waiter, with the time its place has left.
	AcquireQueued(ctx context.Context, name, owner string, ttl, place time.Duration) (Lease, error)

	// Dequeue takes owner's place in name's queue away, for a waiter that
	// gives up. It is not an error if owner has no place.
	Dequeue(ctx context.Context, name, owner string) error
}

// TurnWaiter is implemented by Waiters whose store wakes one waiting
// Locker per release, instead of every Locker that watches the name, so
// that a release does not set off a herd of Acquires from every process
// that waits for it. Run's WithWait uses it when the Locker has it.
//
// A Locker waits for a name with a Watch from WatchTurn and calls
// AcquireOrWait instead of Acquire. Each AcquireOrWait that finds the
// name held by another owner leaves the Locker a mark among the name's
// waiters, in the same round trip, that lasts a few seconds (MarkLife)
// unless the next AcquireOrWait renews it. A Release or ForceRelease of
// the name wakes the turn Watches of the Locker whose unexpired mark is
// oldest, and no other Locker's; when no Locker has a mark, it wakes
// every turn Watch, as a plain Watch would be woken. An AcquireOrWait
// that acquires takes the Locker's mark away, or, when the Locker has
// other turn Watches on the name still waiting, puts it at the back, so
// Lockers take turns. A mark never holds anyone back: any Acquire of a
// free name succeeds. Wake-ups remain hints: a waiter that is not woken
// (its process died with its mark in place, a notification was lost)
// costs the others at most the mark's life, and Run's waiters try again
// at least every two seconds whatever they hear.
//
// Run's waiting attempts go through AcquireOrWait, not Acquire: a type
// that wraps a TurnWaiter to change what Acquire does must change
// AcquireOrWait too, or hide it.
type TurnWaiter interface {
	Waiter
	// WatchTurn is Watch for this Locker's turn: its Changed channel
	// receives when a release of name chose this Locker's mark, when a
	// release found no mark at all, and when the watch may have missed a
	// release (a dropped connection). It returns an error matching
	// errors.ErrUnsupported when the store cannot wake one Locker; a
	// caller may then use Watch.
	WatchTurn(ctx context.Context, name string) (Watch, error)
	// AcquireOrWait is Acquire for an owner that waits for name with a
	// Watch from WatchTurn: it returns what Acquire would, and also leaves,
	// renews or takes away the Locker's mark as described above.
	AcquireOrWait(ctx context.Context, name, owner string, ttl time.Duration) (Lease, error)
}

// MarkLife is how long a TurnWaiter's mark lasts after the AcquireOrWait
// that left or renewed it: what a waiter that died can cost the others.
const MarkLife = 5 * time.Second
