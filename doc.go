// Package lease keeps a piece of work to one holder at a time across
// processes and machines, on a store you already run: SQLite, PostgreSQL,
// MySQL/MariaDB, Redis or etcd (see the backend directory), or in memory
// for tests.
//
// Most programs call Run:
//
//	err := lease.Run(ctx, locker, "nightly-report", time.Minute, func(ctx context.Context) error {
//		l, _ := lease.FromContext(ctx)
//		return report.Generate(ctx, l.Token) // stops when ctx is cancelled
//	})
//	if errors.Is(err, lease.ErrHeld) {
//		// another instance is running it
//	}
//
// # The contract
//
// Every Locker in this module keeps these promises, and the conformance
// package checks each of them:
//
//  1. Acquire succeeds when the name is free, released or expired, and
//     starts a new tenure whose Token is strictly greater than every token
//     that name has had on that store.
//  2. Acquire is re-entrant: by the owner that holds an unexpired tenure it
//     succeeds with the same Token and moves expiry to now+ttl, so retrying
//     after an ambiguous network failure is safe. One exception, on the
//     Lockers of this module: a tenure whose Release failed without an
//     answer through the same Locker is not re-entered, since that Release
//     may still be applied late and end it under its holder; Acquire ends
//     it with a Release of its own and starts a new tenure, with a larger
//     Token.
//  3. When another owner holds an unexpired tenure, Acquire returns an
//     error matching ErrHeld; errors.As gives a *HeldError with the holder
//     and the remaining time.
//  4. Renew extends only the same tenure (owner and Token) while it is
//     unexpired, to now+ttl, keeping the Token; otherwise it returns
//     ErrLost. It never revives an expired tenure and never touches
//     another owner's.
//  5. Release ends an intact tenure and returns nil; if the tenure had
//     expired, was released or was taken over it returns ErrLost and
//     changes nothing. ErrLost at release is how a caller learns that
//     exclusivity may have been broken.
//  6. Inspect returns the current unexpired tenure, or ErrNotHeld.
//  7. Expiry is judged by the store's clock, never the application's.
//     Lease.Deadline is conservative: the local monotonic time read before
//     the request was sent, plus the ttl, minus DriftMargin, so a holder
//     always believes it has lost the lease before the store can give it to
//     anyone else.
//  8. A name is any non-empty UTF-8 string of up to 1024 bytes (spaces,
//     slashes, braces, colons, NUL, any Unicode: distinct names never share
//     a lease); an owner is non-empty UTF-8 of up to 255 bytes; a ttl is
//     between MinTTL and MaxTTL. Anything else is an error matching
//     ErrInvalid that names the problem, and nothing reaches the store.
//  9. A store that is unreachable, a cancelled context, a driver error:
//     returned wrapped with %w, never disguised as ErrHeld or ErrLost, so a
//     caller can always tell "someone else holds it" from "the store is
//     down".
//  10. Of any number of concurrent Acquires of a free name, exactly one
//     wins.
//
// # What a lease guarantees, and what it cannot
//
// A lease is a promise about time. If the holder pauses (a garbage
// collection, a stopped VM, a partition) for longer than its ttl, the store
// hands the lease to someone else while the first holder may still be
// about to write. Deadline and Run make the holder stop on time when it is
// running; nothing can stop a process that is not. That is what the
// fencing Token is for: pass it with every write to the systems the work
// changes, and have them refuse a token older than the newest they have
// seen (see examples/fencing). With fencing, a paused holder's late write
// is rejected instead of corrupting data.
//
// # Backends
//
// Import the backend you use; the root package imports no driver. Each
// backend registers URL schemes with Register, so Open picks one by URL
// (import github.com/leasekit/lease/backend/all for all of them).
//
// Every backend of this module also implements the optional interfaces
// Lister and ForceReleaser (for operators) and driver.Watcher (a watch on
// a name's releases; Can says whether the store can), and renews many
// leases in one round trip (driver.Locker.RenewBatch, which Run uses when
// many leases share a Locker).
//
// # Waiting
//
// Run's WithWait and WithFairWait wait in one line of waiters per name,
// kept by the store where it can notify (memory, Redis, etcd, PostgreSQL
// with a Listener): a release wakes only the waiting Locker whose place
// is first, and within a Locker only its first waiter asks the store.
// Every attempt is the Locker's own Acquire, with the waiter's place in
// the context, so a wrapper that changes Acquire (tracing, a user's own)
// sees every attempt and needs nothing else to keep the waiting. With
// fairness, only the first in line may take a free name; on a store
// without a line Run fails at once. SQLite and MySQL are polled.
//
// To write a backend of your own, implement package driver's Store and
// certify it with package conformance.
//
// # Guides
//
// The repository's docs pages are the guides; these documents are the
// reference:
//
//   - the contract, and what a lease cannot guarantee: https://github.com/leasekit/lease/blob/main/docs/contract.md
//   - picking a backend: https://github.com/leasekit/lease/blob/main/docs/backends.md
//   - waiting and fairness: https://github.com/leasekit/lease/blob/main/docs/waiting.md
//   - fencing: https://github.com/leasekit/lease/blob/main/docs/fencing.md
//   - many leases in one process: https://github.com/leasekit/lease/blob/main/docs/many-leases.md
//   - performance: https://github.com/leasekit/lease/blob/main/docs/performance.md
package lease
