// Package election elects one leader at a time for a named office, on any
// lease.Locker: memory, SQLite, PostgreSQL, MySQL/MariaDB, Redis or etcd.
//
// A Candidate campaigns for the office; elected, it runs its Work for one
// term while lease.Run renews the lease, and stands by again when the
// term ends. Anyone, candidate or not, can read the current leader with
// Current and follow changes with Observe.
//
//	c, err := election.NewCandidate(locker, "scheduler",
//		election.WithID(hostname), election.WithMetadata("10.0.0.5:8080"))
//	...
//	err = c.Run(ctx, func(ctx context.Context, t election.Term) error {
//		return scheduler.Serve(ctx, t.Number) // until ctx is cancelled
//	})
//
// # Terms
//
// A term is one tenure of the office's lease, and its Number is the
// lease's fencing token: strictly greater than every earlier term's on the
// same store, whichever candidate led it, on every backend. Hand it to
// the systems the leader writes to (package fence), so that a leader
// that was paused past its term cannot overwrite its successor's work.
//
// The work's context is cancelled when the term ends: at the latest at
// the lease's Deadline, which comes before the store can elect anyone else
// (lease.Run's watchdog), as soon as a renewal reports the lease lost, on
// Resign, or when the campaign's context ends. context.Cause tells which:
// an error matching lease.ErrLost, ErrResigned, or the campaign context's
// cause.
//
// # One term, or a service that stands by
//
// Run is the loop a service runs: it campaigns, leads whenever elected,
// and after losing leadership stands by and campaigns again, until Resign
// or the end of its context; the Work returning on its own ends it too,
// since the Work is what the candidate campaigns for. Lead is one term:
// it returns when the term is over, however it ended, for a caller that
// wants to decide (exit the process when leadership is lost, as
// Kubernetes recommends, say). Both run on the caller's goroutine.
//
// # Handoff
//
// A term ends gracefully in one order: the Work's context is cancelled,
// the Work returns, the lease is released, and only then can the next
// candidate be elected; OnStoppedLeading's function runs after the
// release. Renewals stop when the Work's context ends, so the Work has
// until its term's Deadline to wind down: it then holds the office no
// longer, whether or not it has returned (a Work that ignores its context
// past the Deadline may overlap the next leader, which is what the
// fencing token Term.Number is for). A Work that decides to step down
// returns, or calls Resign with its own context. The next candidate
// learns of the release from the store where it can notify (the memory,
// Redis and etcd backends, and PostgreSQL with a Listener: the office's
// line of waiters wakes one standing-by candidate), so a voluntary
// handoff takes about one round trip plus that wake-up, not a ttl; where
// the store is polled (SQLite, MySQL), the wake-up is lease.Run's
// jittered backoff (at most a second, and never
// past the old term's expiry). A leader that dies is replaced once its
// lease expires: within the ttl plus the store's expiry lag.
//
// # Observers
//
// Observe yields the current term, then every change, including the
// office falling vacant, and never a term older than one it yielded. It
// uses the store's notifications where the Locker is a driver.Watcher (in
// this module the memory, Redis and etcd backends and PostgreSQL with a
// Listener notify releases, etcd expiries too; SQLite and MySQL are
// polled), reads the office again when
// the term is due to expire, polls at least every poll interval (1s by
// default), and polls from 10ms up when the office is vacant, since no
// store notifies an election. See Observe for the details.
//
// # The owner encoding
//
// The leader's ID and metadata are stored in the lease's owner string, so
// they are written in the same step as the tenure and an observer never
// sees one leader's metadata with another's term. A lease owner holds 255
// bytes of UTF-8 without NUL; a candidate's owner is
//
//	ID " " NONCE [" " METADATA]
//
// where ID (WithID; "hostname:pid" by default) is non-empty UTF-8 without
// spaces or control characters, NONCE is 12 lowercase hex digits, fresh
// for every term (so two candidates with one ID never share a tenure),
// and METADATA (WithMetadata) is any UTF-8 without NUL, left out with its
// space when empty. ID and METADATA together may take 241 bytes.
// NewCandidate refuses longer ones with an error matching
// lease.ErrInvalid that gives the room left. An owner in any other form
// (a lease taken by "lease run", say) is reported as Term.Leader, whole,
// with no metadata. The encoding is stable: tools in other languages may
// parse it.
//
// # Callbacks
//
// OnStartedLeading and OnStoppedLeading are called exactly once per term,
// in that order, and only by the candidate that led the term: never for a
// candidate that was only campaigning when its context ended (the bug of
// kubernetes#23731 and client-go#1187), and the stop callback also when
// the Work panics.
//
// # Guide
//
// A walk through elections, with the handoff and observer patterns:
// https://github.com/leasekit/lease/blob/main/docs/elections.md.
package election
