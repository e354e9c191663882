package driver

import (
	"context"
	"time"
)

// Tenure is one tenure of a name as a store reports it. The Locker turns
// it into a lease.Lease (adding the Deadline) or a *lease.HeldError.
type Tenure struct {
	// Name is the lease name. A Store may leave it empty in results about
	// the name it was asked for; the Locker fills it in.
	Name string
	// Owner is the holder of the tenure.
	Owner string
	// Token is the tenure's fencing token; never zero.
	Token uint64
	// Expires is when the tenure ends by the store's clock.
	Expires time.Time
	// Acquired is when the tenure began by the store's clock, or zero when
	// the store does not record it. Renew may leave it zero: the Locker
	// keeps the caller's.
	Acquired time.Time
	// Remaining is how long the tenure had left by the store's clock when
	// the store answered. Acquire must set it when another owner holds the
	// name (it becomes HeldError.Remaining); elsewhere it may be zero.
	Remaining time.Duration
}

// Store is what a backend implements: the store's side of each operation
// and nothing else. The Locker that NewLocker builds around a Store calls
// it only with arguments that passed the contract's checks, only while the
// Locker is open and only with a context that has not ended; it stamps
// every Deadline, builds every sentinel error and prefixes every error, so
// a Store returns plain outcomes and its driver's own errors.
//
// Every method must return by the time ctx ends (plus the few milliseconds
// a driver needs to notice), with an error that wraps the context's error
// or the driver's; it must never report a store failure as an outcome
// (a name that looks held, a tenure that looks lost).
type Store interface {
	// Acquire starts a tenure of name for owner lasting ttl by the store's
	// clock when the name is free (never held, released or expired), with
	// a Token greater than every token the name has had; extends owner's
	// own unexpired tenure to now+ttl keeping its Token; and otherwise
	// changes nothing. It returns the tenure that holds name when it is
	// done: the caller's when its Owner is owner, else the holder's, with
	// Remaining set.
	Acquire(ctx context.Context, name, owner string, ttl time.Duration) (Tenure, error)

	// Renew extends t (matched by Name, Owner and Token) to now+ttl by the
	// store's clock if it is still unexpired, and returns it with its new
	// Expires and ok true. If t is not the current unexpired tenure of its
	// name it changes nothing and returns ok false.
	Renew(ctx context.Context, t Tenure, ttl time.Duration) (renewed Tenure, ok bool, err error)

	// Release ends t (matched by Name, Owner and Token) if it is still the
	// current unexpired tenure and returns true; otherwise it changes
	// nothing and returns false. A later tenure's Token must still be
	// greater than t's.
	Release(ctx context.Context, t Tenure) (ok bool, err error)

	// Inspect returns the current unexpired tenure of name, or ok false
	// when there is none.
	Inspect(ctx context.Context, name string) (t Tenure, ok bool, err error)

	// Close releases what the Store opened itself. The Locker calls it
	// once.
	Close() error
}

// Capable is a Store whose optional interfaces depend on how it was
// opened (the SQL store can watch only with a PostgreSQL Listener). The
// Locker asks Can before it uses one, and answers lease.Can from it:
// Can(p) reports whether the Store can do what the interface that p (a
// nil pointer: *Watcher, *TurnWatcher, *Lister, *ForceReleaser,
// *BatchRenewer) points to promises. A Store that is not Capable can do
// all that it implements.
type Capable interface {
	Can(p any) bool
}

// Lister is a Store that can list tenures; the Locker's List uses it.
type Lister interface {
	// List returns the unexpired tenures whose names start with prefix
	// ("" for all), sorted by name in byte order.
	List(ctx context.Context, prefix string) ([]Tenure, error)
}

// ForceReleaser is a Store that can end a tenure whoever holds it; the
// Locker's ForceRelease uses it.
type ForceReleaser interface {
	// ForceRelease ends the current unexpired tenure of name and returns
	// it, or returns ok false when there is none. The next tenure's Token
	// must be greater.
	ForceRelease(ctx context.Context, name string) (ended Tenure, ok bool, err error)
}

// BatchRenewer is a Store that renews many tenures in one call, in a
// number of round trips that does not grow with the batch. The Locker's
// RenewBatch uses it; without it, RenewBatch renews one tenure at a time.
type BatchRenewer interface {
	// RenewBatch renews each item as Store.Renew would and returns one
	// outcome per item, in order. It returns an error, and no outcomes,
	// only when the call as a whole failed, so that nothing is known of
	// any item; an error that concerns one item goes in its outcome.
	RenewBatch(ctx context.Context, items []RenewItem) ([]RenewOutcome, error)
}

// RenewItem is one tenure for BatchRenewer.RenewBatch to renew for TTL.
type RenewItem struct {
	Tenure Tenure
	TTL    time.Duration
}

// RenewOutcome is what BatchRenewer.RenewBatch did with one RenewItem: as
// Store.Renew's results.
type RenewOutcome struct {
	Tenure Tenure // the renewed tenure, with its new Expires, when OK
	OK     bool
	Err    error
}

// Watcher is a Store, or a Locker, that can say when a name may have
// become free (PostgreSQL LISTEN/NOTIFY, Redis pub/sub, an etcd watch),
// so that a caller waiting for a busy name wakes when it is released
// instead of polling. The Locker's Watch uses the Store's; without it,
// Watch reports errors.ErrUnsupported and lease.Run polls. Every Locker
// of this module has Watch; lease.Can[driver.Watcher](l) says whether
// its store can.
type Watcher interface {
	// Watch starts watching name and returns once the watch is in place,
	// so that no release after Watch returns goes unnoticed while the
	// store's connection holds. The Watch's Changed channel then receives
	// whenever the tenure of name may have ended: released,
	// force-released or, where the store says so, expired. A wake-up is a
	// hint, never a grant (spurious ones are fine, missed ones are not):
	// Acquire decides. ctx bounds setting up the watch and, after that,
	// its life; the Watch lasts until Stop or until ctx ends.
	Watch(ctx context.Context, name string) (Watch, error)
}

// Watch is a watch on one name, from Watcher.Watch.
type Watch interface {
	// Changed receives a value, at most one buffered, whenever the watched
	// name may have become free. It is never closed.
	Changed() <-chan struct{}
	// Stop ends the watch and releases what it holds. It is safe to call
	// more than once.
	Stop()
}

// TurnWatcher is a Watcher that keeps a line of waiters per name: the
// one order in which waiting Lockers are woken and, for fair waiting,
// served. The Locker's waiting (lease.Run's WithWait and WithFairWait)
// uses it; each Locker has a waiter ID of its own (see Mark).
//
// The line of a name is its marks: each a waiter ID with the instant it
// was first placed (its place in line) and the instant it lapses, both by
// the store's clock. A lapsed mark is out of the line.
//
// The decision. Release and ForceRelease of a name choose the unexpired
// mark placed first and wake the turn Watches of that waiter, and no
// other waiter's; when there is no unexpired mark they wake every turn
// Watch of the name. The choice is one decision, made from the store's
// state at the release (the releasing statement or script names the
// waiter, or every Locker computes it from the marks as of the release's
// revision), so that two Lockers never disagree on whom a release chose.
// Plain Watches (Watcher.Watch) wake on every release, as before. Expired
// marks are dropped whenever it is cheap; a mark must never outlive its
// lapse by much in the store's memory.
//
// The two policies. By default (Mark.Fair false) the line only decides
// whom a release wakes: any Acquire or AcquireOrWait of a free name
// succeeds. With Mark.Fair, AcquireOrWait of a free name succeeds only
// for the waiter whose mark is first among the unexpired marks, or when
// there is none; plain Acquire is never held back.
type TurnWatcher interface {
	Watcher
	// WatchTurn is Watch for waiter's turns on name: its Changed channel
	// receives when a release chose waiter's mark or found none, when
	// StopWaiting passed the turn to waiter, and when the watch may have
	// missed one (a dropped connection).
	WatchTurn(ctx context.Context, name, waiter string) (Watch, error)
	// AcquireOrWait is Acquire that also, in the same round trip, changes
	// m.Waiter's mark on name:
	//   - when another owner holds name, it places the mark at the back if
	//     it has none (or only a lapsed one) and moves its lapse to
	//     now+m.Life either way, and returns the holder's tenure, as
	//     Acquire does;
	//   - when name is free but m.Fair and another waiter's unexpired mark
	//     is ahead of m.Waiter's (a waiter without a live mark is behind
	//     every live mark), it acquires nothing, places or renews the mark
	//     as for a held name, and returns a Tenure whose Owner is empty and
	//     whose Remaining is the time the first mark has left;
	//   - when it acquires (or re-enters) it removes the mark, or, when
	//     m.Keep, places it at the back anew with a lapse of now+m.Life.
	AcquireOrWait(ctx context.Context, name, owner string, ttl time.Duration, m Mark) (Tenure, error)
	// StopWaiting removes waiter's mark on name, if it has one. When that
	// mark was live and first and name is free, a release most likely
	// chose waiter, which gives up: the store must then wake the next
	// mark's waiter (or, with no mark left, every turn Watch), as a
	// release would. The conformance suite checks that the next waiter
	// gets the name promptly.
	StopWaiting(ctx context.Context, name, waiter string) error
}

// Mark says how AcquireOrWait treats a waiter's mark (see TurnWatcher).
type Mark struct {
	Waiter string        // the waiting Locker's ID: printable ASCII, at most 64 bytes
	Life   time.Duration // how long the mark lasts from the call, by the store's clock; round up to the store's granularity
	Keep   bool          // on acquiring, place the mark at the back instead of removing it
	Fair   bool          // take a free name only when this mark is first in line (or the line is empty)
}
