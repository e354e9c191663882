// Package fence is the checking side of the fencing token: the systems a
// lease holder writes to use it to refuse writes from a holder that has
// lost its lease.
//
// A lease cannot stop a holder that is not running: a process paused
// past its ttl (a long GC, a frozen VM, a partition) wakes up believing
// it still holds the lease while another holder works. Every tenure's
// Lease.Token is larger than the tokens of all earlier tenures of its
// name, so the resource being written to can tell the writers apart, if
// it checks.
//
// # The rule
//
// A write tagged with (lease name, token) is accepted only if token is at
// least the largest token ever accepted for that name on that resource.
// Accepting it raises the stored maximum to token. A refused write changes
// nothing and returns an error matching ErrStale: a *StaleError carrying
// the name, the token presented and the larger token that beat it. An
// equal token is accepted, so one holder can write many times in its
// tenure; a larger one is accepted and remembered, so every earlier holder
// is refused from then on. Names are kept apart byte for byte: a maximum
// raised for one name never refuses another.
//
// Tokens run from 1 to MaxToken; names are any lease name: non-empty
// UTF-8 of up to lease.MaxNameLen (1024) bytes, NUL, braces and control
// characters included. Validate checks both; bad input gives an error
// matching lease.ErrInvalid and changes nothing.
//
// # The two calls
//
// The holder sends Lease.Token with each write: lease.FromContext(ctx)
// inside lease.Run, LEASE_TOKEN under the lease command, and for HTTP the
// Transport, which adds the headers for you. The resource checks it with a
// checker that lives where the protected data lives, so that the check and
// the write commit together:
//
//   - SQL (package sqlfence): one statement on a small fence table, inside
//     the caller's own transaction, for PostgreSQL, MySQL/MariaDB and
//     SQLite; and a documented conditional UPDATE for a token column on the
//     caller's own rows.
//   - Redis (package redisfence): one Lua script that checks and raises the
//     fence and makes the guarded SET, HSET, DEL... in the same step.
//   - etcd (package etcdfence): a clientv3.Cmp and ops for the caller's own
//     transaction.
//   - HTTP: Middleware checks the headers against any Checker and answers
//     409 Conflict with the winning token.
//   - Memory: an in-process checker for tests.
//
// The package fencetest holds the cases every checker passes; run them
// against your own.
//
// # Atomic with the write it guards
//
// A check made in one step and a write made in another leave a gap: a
// stale writer can pass the check just before a newer holder's write and
// land its own write after it. Every checker above therefore offers the
// guarded write in the same atomic step as the check (the SQL transaction,
// the Lua script, the etcd transaction, Memory.Guard). The Checker
// interface, which only checks and raises, serves Middleware, whose
// handler writes after it: see Middleware for how to close that gap.
//
// # HTTP
//
// A guarded request carries two headers: HeaderName (Lease-Name), the lease
// name percent-encoded so that any name fits in a header, and HeaderToken
// (Lease-Token), the token in decimal. A refused request gets 409 Conflict
// with HeaderMax (Lease-Token-Max), the winning token; CheckResponse turns
// that answer back into a *StaleError on the client. Malformed or missing
// headers get 400 Bad Request. The header constants document the format
// exactly; EncodeName and DecodeName implement it.
//
// # Guide
//
// Fencing from end to end, with each checker in use:
// https://github.com/leasekit/lease/blob/main/docs/fencing.md.
package fence
