package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Locker keeps a named piece of work to one holder at a time.
//
// Every implementation in this module, and every store certified with the
// conformance package, keeps the contract written in the package
// documentation. All methods are safe for concurrent use.
type Locker interface {
	// Acquire starts a tenure of name for owner lasting ttl, or, when owner
	// already holds an unexpired tenure of name, extends it to now+ttl and
	// returns it with the same Token (re-entrancy: retrying an Acquire whose
	// outcome was lost in the network is safe). A tenure whose Release
	// through the same Locker failed without an answer is not re-entered:
	// that Release may be applied late, so Acquire ends the tenure and
	// starts a new one, with a larger Token.
	//
	// When another owner holds name it returns an error matching ErrHeld,
	// whose *HeldError says who holds it and for how long.
	Acquire(ctx context.Context, name, owner string, ttl time.Duration) (Lease, error)

	// Renew extends the tenure l, which must still be intact (same owner,
	// same Token, not expired), to now+ttl and returns it with a fresh
	// Expires and Deadline. Otherwise it returns an error matching ErrLost
	// and changes nothing.
	Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)

	// Release ends the tenure l. It returns nil when l was intact, and an
	// error matching ErrLost, changing nothing, when l had expired, was
	// released already or was taken over: the caller's exclusivity may have
	// been broken.
	Release(ctx context.Context, l Lease) error

	// Inspect returns the current unexpired tenure of name (Name, Owner,
	// Token and Expires; Deadline is zero, since the caller holds nothing),
	// or an error matching ErrNotHeld.
	Inspect(ctx context.Context, name string) (Lease, error)

	// Close releases the resources the Locker opened itself (a pool it was
	// given stays open). It does not release held leases: they expire.
	// Calls after Close fail with an error matching ErrClosed.
	Close() error
}

// Lease is one tenure of a name: a holder's proof of ownership.
//
// A Lease is a plain value. Keep the newest one returned by Acquire or
// Renew and pass it to Renew and Release.
type Lease struct {
	// Name is the name the tenure is for, exactly as given to Acquire.
	Name string
	// Owner is the holder's identity, exactly as given to Acquire.
	Owner string
	// Token is the fencing token: strictly greater than the token of every
	// earlier tenure of Name on the same store, and unchanged by Renew and
	// re-entrant Acquire. Pass it to the systems the work writes to so they
	// can reject writes from a holder that lost the lease (see the package
	// documentation). Zero is never a valid token.
	Token uint64
	// Expires is when the store will treat the tenure as expired, by the
	// store's clock. It is for display and diagnostics: never compare it
	// with this process's clock to decide whether you still hold the lease;
	// use Deadline.
	Expires time.Time
	// Acquired is when the tenure began, by the store's clock: the grant
	// that started it, unchanged by Renew and re-entrant Acquire. It is
	// for display (how long a holder has held a name); zero when the store
	// does not record it (etcd).
	Acquired time.Time
	// Deadline is by this process's monotonic clock: act as the holder only
	// before it. It is the local time taken before the request that granted
	// or renewed the tenure was sent, plus the ttl, minus DriftMargin(ttl),
	// so this process stops believing it holds the lease before the store
	// can give it to anyone else. Zero on a Lease returned by Inspect.
	Deadline time.Time
}

// Valid reports whether l is still safe to act on: it has a Deadline and
// the Deadline has not passed by this process's clock.
func (l Lease) Valid() bool {
	return !l.Deadline.IsZero() && time.Now().Before(l.Deadline)
}

// String formats l for logs: name, owner, token and expiry.
func (l Lease) String() string {
	return fmt.Sprintf("lease %q owner=%q token=%d expires=%s", l.Name, l.Owner, l.Token, l.Expires.UTC().Format(time.RFC3339Nano))
}

// The sentinel errors. Match them with errors.Is; every error a Locker in
// this module returns for these cases wraps one of them.
var (
	// ErrHeld means another owner holds an unexpired tenure of the name.
	// The error is (or wraps) a *HeldError with the details.
	ErrHeld = errors.New("lease: held by another owner")

	// ErrLost means the tenure the caller presented is over: it expired,
	// was released, or was taken over. Nothing was changed.
	ErrLost = errors.New("lease: lost")

	// ErrNotHeld means nobody holds an unexpired tenure of the name.
	ErrNotHeld = errors.New("lease: not held")

	// ErrInvalid means an argument was malformed; the error's message names
	// the problem. Nothing was sent to the store.
	ErrInvalid = errors.New("lease: invalid argument")

	// ErrClosed means the Locker was used after Close.
	ErrClosed = errors.New("lease: locker is closed")
)

// HeldError reports that a name is held by another owner. It matches
// ErrHeld with errors.Is; get it with errors.As to read the details.
type HeldError struct {
	// Name is the lease name that was asked for.
	Name string
	// Owner is the current holder. It is empty when the name is free but
	// a fair waiter (WithFairWait) found another waiter ahead of it in
	// the name's line; Remaining is then how long that waiter's place
	// lasts at most.
	Owner string
	// Remaining is how long the current tenure has left by the store's
	// clock, at the moment the store answered. A job queue defers a busy job
	// by min(Remaining, 30*time.Second).
	Remaining time.Duration
}

// Error describes the holder and the time it has left.
func (e *HeldError) Error() string {
	if e.Owner == "" {
		return fmt.Sprintf("lease: %q is free, but another waiter is ahead in its line (its place lasts another %s)", e.Name, e.Remaining.Round(time.Millisecond))
	}
	return fmt.Sprintf("lease: %q is held by %q for another %s", e.Name, e.Owner, e.Remaining.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrHeld) true for a *HeldError.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }
