// Package semaphore keeps a named piece of work to at most N holders at a
// time, on any lease.Locker: memory, SQLite, PostgreSQL, MySQL/MariaDB,
// Redis or etcd. "At most four nightly exports", "one job per GPU".
//
//	err := semaphore.Run(ctx, locker, "exports", 4, time.Minute,
//		func(ctx context.Context, s semaphore.Slot) error {
//			return export(ctx, s.Index, s.Lease.Token) // stops when ctx is cancelled
//		}, semaphore.WithWait(10*time.Minute))
//
// # The invariant
//
// A semaphore of N slots is N ordinary leases, and a holder holds a slot
// only as an intact tenure of that slot's lease: slot i of name is the
// lease SlotName(name, i), a holder acquiring under capacity N only ever
// asks for slots 0 to N-1, and the Locker keeps each lease to one holder
// at a time. So at any moment name has at most max(N) holders, the
// largest N among the holders of the moment, which is N itself whenever
// every caller passes the same N; each holder's work runs only before its
// slot's Deadline, which comes before the store can give that slot to
// anyone else. The one place that turns a capacity and an index into a
// lease name is slotName, which refuses an index outside 0 to N-1.
//
// # Slots and fencing
//
// Each slot is a lease with its own tenures, so each slot has its own
// fencing tokens: strictly increasing per slot, on every backend, and
// unrelated between slots (slot 0 may be at token 9 while slot 3 is at
// 2). A fence checker (package fence) therefore guards a resource per
// slot: fence under the slot's lease name, Slot.Lease.Name, never under
// the semaphore's name, or a holder of a slot with small tokens would be
// refused after a holder of another slot wrote:
//
//	fences.Guard(ctx, s.Lease.Name, s.Lease.Token, write)
//
// That is the right unit: what must not happen is two holders of one
// slot at once (a paused holder that lost slot 2 writing after slot 2's
// next holder has), while the N slots are meant to work side by side.
// When the slots share one resource (N writers to one table), give each
// slot its own part of it (a row, a partition, a GPU) keyed by
// Slot.Index, and fence each part with its slot's name.
//
// # Slot names
//
// Slot i of a semaphore called name is the lease
//
//	lease.semaphore/NAME#I
//
// where NAME is the semaphore's name as given (any UTF-8, '#' and '/'
// included) and I is the slot's index in decimal, without leading zeros,
// from 0 to N-1: "lease.semaphore/exports#0" to
// "lease.semaphore/exports#3". The index is the part after the last '#',
// so ParseSlotName reads any slot name back unambiguously, and two
// semaphores, or two slots, never share a lease. Names beginning with
// Prefix ("lease.semaphore/") are reserved for semaphores: give no lease
// of your own such a name (the lease command refuses it without
// --slots), and the slot names never collide with your own names. "lease
// list lease.semaphore/exports#" lists a semaphore's holders, "lease
// status --slots N exports" shows them slot by slot. The layout is
// stable: tools in other languages may rely on it.
//
// The semaphore's name may take lease.MaxNameLen minus the prefix, the
// '#' and the digits of N-1 bytes; N is at most MaxSlots.
//
// # Capacity, and capacity changes
//
// N is not stored anywhere: each caller passes it, and it decides which
// slots that caller may take. Callers that pass different N for one name
// therefore follow one rule: each takes only slots below its own N. So
//
//   - holders that started under a larger N keep their slots until they
//     end (they are never cut short by a smaller N);
//   - new holders respect the N they pass: a caller with N = 2 takes
//     slot 0 or 1 or waits, whatever is held above;
//   - there are never more than max(N) holders, and once the holders
//     started under a larger N have ended, never more than the new N.
//
// Lowering N from 4 to 2 thus takes effect as the holders of slots 2 and
// 3 finish; raising it takes effect at once for the callers that pass the
// new N. Mixing N values is not an error; use one N per name unless you
// are changing it.
//
// # Cost
//
// Acquire tries slots one at a time, in a random order, and stops at the
// first it gets. So it costs one round trip (one Acquire of one lease)
// whenever the first slot it tries is free: with k of N slots held, the
// first try succeeds with probability (N-k)/N, and on average it takes
// (N+1)/(N-k+1) tries (2 at half full, whatever N). A full
// semaphore costs N round trips to find full: Acquire returns a
// *FullError (matching lease.ErrHeld) after trying every slot once. The
// random order spreads concurrent callers over the slots, so they seldom
// contend for the same one. (It does not use lease.Lister: listing is one
// query on SQL but a scan of every key on Redis and a round trip per
// tenure on etcd.)
//
// A caller that waits (Run with WithWait) on a full semaphore pays, once,
// the N tries that found it full, then one watch per slot where the
// Locker is a driver.Watcher (memory, Redis, etcd, PostgreSQL with a
// listener: each watch is a subscription, set up in about one round trip),
// then N tries again, since a slot may have been released before its
// watch was in place. From then on a release of any slot wakes it, and it
// first tries the slot that was released: one round trip per wake-up,
// unless another waiter took that slot first, in which case it tries the
// others. It also wakes, and tries the slot whose holder ends first, when
// that holder's tenure is due to expire (a crashed holder), and at least
// every two seconds, in case a notification was lost. Every waiter of a
// semaphore watches every slot, so a release wakes them all and one wins;
// keep the number of waiters on one semaphore modest. Where the store
// cannot notify (SQLite, MySQL/MariaDB, PostgreSQL without a listener)
// the waiter polls: N tries per poll at most, with jittered backoff from
// 10ms doubling to one second, and never sleeping past the expiry of the
// slot that frees first.
//
// # Guide
//
// When to use a semaphore, and its costs beside a single lease:
// https://github.com/leasekit/lease/blob/main/docs/semaphores.md.
package semaphore
