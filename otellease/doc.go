// Package otellease records what a lease.Locker does as OpenTelemetry
// metrics and spans.
//
// Wrap any Locker once, where it is made, and use the wrapper everywhere
// instead, lease.Run included:
//
//	locker, err := otellease.Wrap(store, otellease.WithBackend("postgres"))
//
// The wrapper passes every call through unchanged (same arguments, same
// results, same errors) and records it on the way out. It is one type
// whatever it wraps, with the optional methods of this module's Lockers
// (List, ForceRelease, Watch, RenewBatch), each passed on to the wrapped
// Locker's; lease.Can on the wrapper answers as on the wrapped Locker, so
// ask it, not a type assertion, what the wrapper can do.
// Without WithMeterProvider and WithTracerProvider it uses the global
// providers of go.opentelemetry.io/otel, which record nothing until
// the program installs an SDK with otel.SetMeterProvider and
// otel.SetTracerProvider (before or after Wrap). The lease module's root
// package does not import this package or OpenTelemetry: only programs
// that import otellease link it.
//
// Waiting needs no method of the wrapper's: a caller that waits for a busy
// name (lease.Run with WithWait or WithFairWait) waits through Acquire,
// whose context carries its place in the line, and the wrapper passes
// that context on to the wrapped Locker's Acquire. So a wrapped Locker
// keeps its waiting, woken and fair, and every attempt of a waiting
// caller, the one that acquires included, is recorded as an acquire.
//
// # Metrics
//
// Instruments come from the meter "github.com/leasekit/lease/otellease".
// Every measurement carries lease.backend (see WithBackend). Names follow the
// OpenTelemetry naming conventions; a Prometheus exporter shows them as
// lease_operation_duration_seconds, lease_held, lease_hold_duration_seconds,
// lease_renewal_slack_seconds and lease_losses_total.
//
//	lease.operation.duration  histogram, s      every call, by lease.operation,
//	                                            lease.outcome and, on failures,
//	                                            error.type
//	lease.held                up-down counter,  tenures acquired through this
//	                          {lease}           wrapper whose Deadline has not
//	                                            passed and that were not released
//	                                            or found lost, at collection time
//	lease.hold.duration       histogram, s      how long each such tenure was
//	                                            held, from its Acquire to its end,
//	                                            by lease.outcome: released, lost,
//	                                            or error (a Release that failed)
//	lease.renewal.slack       histogram, s      for each successful renewal, how
//	                                            long before the Deadline of the
//	                                            Lease it renewed the answer came
//	lease.losses              counter, {loss}   tenures lost, by lease.loss.cause
//
// lease.operation is one of acquire, renew, renew_batch, release, inspect,
// list, force_release and watch.
// lease.outcome is what the call found:
//
//	acquired     Acquire started or re-entered a tenure
//	held         Acquire found another owner holding the name or, in a
//	             fair wait, another waiter first in line (ErrHeld);
//	             Inspect found a holder
//	renewed      Renew or every renewal of a RenewBatch succeeded
//	lost         Renew or Release found the tenure over (ErrLost); a
//	             RenewBatch in which at least one tenure was lost
//	released     Release or ForceRelease ended a tenure
//	not_held     Inspect or ForceRelease found nobody holding the name
//	listed       List answered
//	watching     Watch is in place
//	unsupported  the Locker cannot do this (errors.ErrUnsupported)
//	invalid      the call was refused for a malformed argument (ErrInvalid)
//	closed       the Locker was closed (ErrClosed)
//	error        anything else: the store failed, or the call's context
//	             ended (error.type says timeout, canceled or _OTHER)
//
// A RenewBatch gets the outcome of its worst result, in the order error,
// closed, invalid, lost, renewed.
//
// Only the outcomes invalid, closed and error are failures: they carry
// error.type (the outcome itself for invalid and closed) and set the span's
// status to Error. A busy name, a lost tenure and a free name are answers
// from the store, not failures of the call; they show in lease.outcome and
// in lease.losses.
//
// # Losses and what the wrapper cannot see
//
// The wrapper knows only the calls made through it. It follows each
// tenure that an Acquire through it granted (by name and token) until the
// tenure ends, and counts a loss, once per tenure, by lease.loss.cause:
//
//	renew_lost    a Renew (or a RenewBatch item) answered ErrLost for a
//	              tenure whose Deadline had not passed when the call began:
//	              the store ended it early (a ForceRelease, or a store whose
//	              clock or expiry broke the contract)
//	release_lost  a Release answered ErrLost, likewise before the Deadline
//	deadline      the tenure's Deadline passed before a renewal of it landed:
//	              a Renew, Release or re-entrant Acquire began after the
//	              Deadline, a Renew's answer arrived after
//	              it, or, with no call at all, a metric collection found
//	              the Deadline past
//
// A deadline loss is what lease.Run's watchdog acts on: Run cancels its
// function's context when the Deadline passes without a renewal, which the
// wrapper cannot see; it sees the renewal that comes too late, the Release
// that follows (whatever its answer), or, if neither comes, the passing
// Deadline at the next collection. A tenure left to expire on purpose (no
// Release) counts as a deadline loss too: the wrapper cannot tell a
// deliberate expiry from a stalled holder.
//
// After a tenure ends (released, lost, or a Release that failed) the
// wrapper forgets it: later calls with that Lease record their operation
// and span but no loss and no hold time. Tenures that were acquired without
// the wrapper, or while no meter provider was recording, are not followed
// at all: a Renew of one records its operation and slack only. Closing the
// wrapper stops lease.held from being observed for it.
//
// # Spans
//
// Every call is one span of kind client, named "lease." and the operation
// (lease.acquire, lease.renew_batch, ...), a child of the span in the call's
// context; the Locker is called with the span's context, so a store
// client's own instrumentation (otelsql, redisotel) nests beneath it (a
// Watch is set up under the caller's context, since it outlives the
// span). The span's attributes are set when it ends, in one call, which
// costs the SDK least; a sampler sees the span's name and kind. The span
// carries lease.operation, lease.backend, lease.outcome and, where the
// call has them, lease.name (or lease.name_sha256, see WithHashedNames),
// lease.owner, lease.token, lease.ttl and, on a renewal, lease.slack (both
// in seconds). A busy Acquire adds the holder (lease.holder, absent when a
// fair wait found another waiter first in line) and the time left
// (lease.remaining, in seconds); a RenewBatch records lease.batch.size and
// how many tenures were renewed, lost or failed (lease.batch.renewed,
// lease.batch.lost, lease.batch.failed) instead of names. A failure sets
// the status to Error with the error's text as its description, except
// under WithHashedNames, since the text quotes the name. A waiting caller
// makes one lease.acquire span per attempt, each a child of the span in
// its context.
//
// # Cost
//
// With no-op providers the wrapper checks that nothing records and skips
// its bookkeeping; see the package's benchmarks, and
// https://github.com/leasekit/lease/blob/main/docs/observability.md for the overhead per call with no-op
// and SDK providers and a guide to the metrics and spans.
package otellease
