// Package etcdlease is a lease.Locker on etcd v3. The package lives in the
// directory backend/etcd but is named etcdlease so that it does not clash
// with etcd's own packages (clientv3, embed, ...) in the files that import
// both.
//
// # The lease invariant
//
// A tenure lives exactly as long as the etcd lease its key is attached
// to, so the backend's safety rests on one rule: an etcd lease is kept
// alive, revoked or reused only on behalf of exactly the tenures that may
// be on it. A Locker keeps a lease alive for a tenure only when that
// tenure is the only one the lease may carry, or for a renewal of every
// tenure it may carry at once. It revokes a lease, or puts it back in its
// pool for the next tenure, only when every write that could have put a
// tenure on it has been answered and every tenure those writes put there
// has been shown gone by an answered write or read; a lease whose
// tenure's holder may still renew it (a move, a ForceRelease) is revoked,
// never reused. A write sent without an answer may still be applied, so
// the lease it named is from then on never revoked or reused, and kept
// alive only for the one tenure that write was for, until a read finds
// that tenure on it (the write was applied) or etcd ends the lease by its
// own clock. A lease the Locker did not hand to its own writes, or whose
// record it has forgotten (only whole, only after etcd has surely ended
// it), it never revokes or reuses, and keeps alive only after etcd has
// listed the keys on it (LeaseTimeToLive). The ledger (ledger.go) is the
// only code that decides any of this: every path that keeps a tenure's
// lease alive, revokes it, reuses it or adopts a tenure found on it asks
// the ledger first, and does only what it allows.
//
// # The line invariant
//
// The waiting line of a name is its marks and nothing else: one key per
// waiting Locker, whose create revision is its place and which lives
// exactly as long as its own etcd lease, ended by etcd's clock the mark's
// life after the waiter last asked; whom the line serves is decided from
// etcd's state at one revision, never from what a Locker has seen. When
// the name's key is deleted at revision R (a Release, a ForceRelease, an
// expiry) or its pass key is put at R (a StopWaiting that gave the turn
// up), the waiter chosen is the one whose mark is first by create
// revision among the marks at R, and every turn Watch wakes when there is
// none; a fair AcquireOrWait takes a free name only when a comparison in
// its own transaction finds its mark first, or the line empty. Every
// release's choice is the first mark as of R (sorted by create revision,
// limit 1): read by the Release's own transaction, which then names it
// to the watching Lockers (nameChoice, turns.go), or, for a deletion that
// names nobody (an expiry, a ForceRelease), read at revision R by each of
// them (chosen, watch.go), so every Locker that watches the name decides
// the same by construction; and every comparison that finds a mark first is
// made in one place, firstInLine (turns.go), which the fair acquisition
// and StopWaiting's pass share.
//
// # Data model
//
// A tenure of a name is one key, prefix+name (prefix defaults to "lease/",
// see WithPrefix), whose value is the owner, attached to an etcd lease
// with the tenure's TTL. The name is stored as its raw bytes (etcd keys
// are arbitrary bytes, and the Locker keeps no other keys under its
// prefix), so distinct names never collide and List is one prefix scan.
//
// The Token is the key's create revision: etcd's revision counter is
// cluster-wide and never goes back (unless the cluster's data is lost or
// rolled back: see "Restores and wiped data" below), so every new tenure
// of a name gets a larger Token than all earlier ones. A re-entrant Acquire
// keeps the existing key, and its etcd lease alive; a re-entrant Acquire
// or Renew that changes the TTL rewrites the key onto a lease of that TTL,
// which keeps its create revision; other Renews only keep its etcd lease
// alive.
//
// Every operation on a tenure is owner-checked: every write is one
// transaction that compares the key's create revision (the Token) and
// value (the owner) before it changes anything, and a keep-alive counts
// only if a read made in the same round trip finds the same tenure on the
// same lease. Unlike concurrency.Mutex.Unlock, which deletes its key
// unconditionally (etcd issue 22082), a Release or Renew that is retried,
// or comes from a holder that lost its tenure, can never touch a later
// tenure: it returns an error matching lease.ErrLost and changes nothing.
//
// # Which tenures share an etcd lease
//
// A tenure lives exactly as long as its etcd lease: etcd ends a key only
// by ending the lease it is attached to. A keep-alive of a lease renews
// every key on it, so tenures cannot share a lease as the keys of a
// concurrency.Session do: renewing one would extend the others, and a
// tenure whose holder stopped renewing would live on as long as any other
// on its lease is renewed. So a lease carries one tenure, or a group of
// tenures that are renewed together:
//
//   - A lease of its own, from the pool or granted for one Acquire, is
//     the rule when Acquires come one at a time.
//   - The Acquires of a burst share grants (see grants in group.go): an
//     Acquire that needs a lease while a grant of its TTL is under way
//     waits for the next grant, with every other that asked meanwhile, up
//     to 128. Each asked before the grant was sent, so its tenure lasts no
//     less than its ttl from its call (its Deadline holds) and, since
//     nothing keeps the lease alive for others, no more than the ttl after
//     its transaction. Ten thousand Acquires at once cost about eighty
//     grants instead of ten thousand.
//   - A group's lease is kept alive only by a renewal of every tenure on
//     it at once (a RenewBatch that covers the group; lease.Run's renewer
//     keeps a group's tenures due together), which renews each of them as
//     its own Renew would. A Renew of some of a group, or any renewal
//     while a transaction that might have put a tenure on the lease went
//     unanswered, moves those renewed onto a lease of their own (a write,
//     as a Renew to another ttl); the others end with the group's lease,
//     at their own time (TestGroupTenureNotRenewedExpires,
//     TestGroupKeptAliveOnlyWhole). A group's lease is revoked once every
//     Acquire of its grant has its answer and none of their tenures is on
//     it any more; never when one went unanswered, which may have put a
//     tenure nobody holds on it (TestUnansweredGroupIsNeverRevoked), and
//     never on the word of a forgotten record (TestForgottenGroupIsNeverRevoked,
//     TestSweepNeverRevokesAGroup): it then expires at its own time.
//   - A Locker knows which leases it put tenures on; a tenure it did not
//     acquire (a Lease handed to another process) may be on another
//     Locker's group. Before it keeps such a lease alive, Renew reads the
//     keys attached to it (LeaseTimeToLive): one round trip more, and a
//     move when it carries other keys. For the same reason a Release or
//     ForceRelease of such a tenure leaves its lease to expire rather than
//     revoke it.
//
// A lease can carry the next tenure once the previous one has ended, if
// nothing can keep it alive for the previous one any more: a keep-alive
// applied after the next tenure began would keep that one alive past its
// own ttl. So a Release whose transaction deleted the tenure's key puts
// a lease of its own back in the Locker's pool only when no keep-alive of
// it for that tenure is under way in this Locker or failed without an
// answer (it could still be applied), and from then on the ledger lets
// no keep-alive of it go out for the released tenure
// (TestReleaseRecyclesOnlyAQuietLease); otherwise it revokes the lease. A
// cycle of Acquire and Release on a Locker is then two raft writes (the
// key's put and its delete), as for concurrency.Mutex, whose session
// lease serves every lock (TestReleaseRecyclesTheLease); leases are
// granted only while the pool is short (see pool). One case is left:
// another Locker that renews the same tenure (a caller that hands its
// Lease value to another process) at the moment it is released can keep
// the lease alive once more after the next tenure began on it; that
// tenure then lasts up to one ttl longer than its own. This delays a
// takeover, never allows two holders.
//
// # Requests ahead of and behind the caller
//
// The Locker keeps a small pool of leases granted ahead of use, per TTL,
// refilled as Acquires use them up and by the leases Releases give back,
// so that Acquire is one transaction
// (with a keep-alive of the pooled lease on the keep-alive stream
// alongside, so that the tenure lasts ttl from the Acquire however long
// the lease waited). It keeps a few LeaseKeepAlive streams open, so that
// a keep-alive is one message and not a new stream. It remembers the lease
// of each tenure it acquired or renewed, so that Renew can send its
// keep-alive and its check at once, and the names it found held by
// another owner, so that the next Acquire of such a name reads before it
// writes: until the holder's time is up, a busy Acquire writes nothing to
// etcd's log. The owner-checked transactions of concurrent calls share one
// etcd transaction (each nested, with its own comparisons and answer), and
// so do their reads.
//
// Behind the caller, after the call has its answer: the revocation of a
// lease that no tenure uses any more and that cannot go back to the pool,
// and the grant that refills the pool.
// They run in the background, bounded in time and number, so a cluster
// that stops answering after the decisive request cannot hold a call past
// its context; Close revokes the pool's spare leases and waits for the
// revocations under way.
//
// # Time
//
// etcd judges expiry: the leader's lessor revokes an expired etcd lease,
// which deletes the key. It checks for expired leases about every 500ms,
// so a tenure can outlive its TTL by up to about half a second (plus a
// consensus round); until its key is deleted it is still held for
// Inspect and Acquire (Renew refuses it: etcd will not keep an expired
// lease alive).
//
// etcd leases have whole-second TTLs and a minimum of 1.5 election
// timeouts rounded up to whole seconds (2s with etcd's default 1s
// election timeout). A Locker asks for the ttl rounded up to whole
// seconds, and etcd may raise it to its minimum; the tenure never ends
// earlier than asked. A Lease's Deadline still comes from the requested
// ttl: driver.DeadlineFrom(start, ttl), with start read before the first
// request.
//
// etcd has no clock a client can read, so Expires is approximate on etcd.
// On a Lease returned by Acquire or Renew it is this process's clock
// before the first request plus the granted TTL: the earliest the tenure
// can end. Inspect, List and HeldError.Remaining ask etcd how long the
// tenure's lease has left; etcd answers in whole seconds, truncated, and
// the Locker adds half a second, so they are within half a second of the
// truth, translated to this process's clock.
//
// Lease.Acquired is always zero on etcd: etcd records no time at all, and
// there is no clean place for a client's estimate. The key's value is the
// owner, and every owner-checked transaction compares it exactly (etcd
// compares whole values, not prefixes), so a grant time written into the
// value would change every comparison and make the tenures of earlier
// versions, whose value is the bare owner, unrecognisable to re-entrant
// Acquire; a second key per tenure would be another write in every
// Acquire and Release and a key under the prefix that List must skip. A
// display that needs when a tenure began can keep its own note of the
// first time it saw the tenure's Token.
//
// # Round trips
//
// Counted by TestRoundTrips and TestRenewBatchRoundTrips, which hold the
// requests back wave by wave to see which go out before any is answered.
// A keep-alive is one message on an open stream; requests marked * run in
// the background, after the call has its answer.
//
//	Acquire, free name                  1  Txn + keep-alive; LeaseGrant* (pool refill)
//	Acquire, free name, pool empty      2  LeaseGrant, then Txn
//	n Acquires at once, pool empty      2  ⌈n/128⌉+1 LeaseGrants, one after another,
//	                                       then Txns shared by up to 32 (see writer)
//	Acquire, re-entrant                 2  Txn + keep-alive, then keep-alive of the
//	                                       tenure's own lease; no write (another ttl:
//	                                       then as Renew, another ttl)
//	Acquire, held by another owner      2  Txn + keep-alive, then LeaseTimeToLive; no write
//	  again, until the holder's time    2  Range (in a read-only Txn), then LeaseTimeToLive;
//	    is up                              no raft entry at all
//	Renew, same ttl                     1  keep-alive + read-only Txn; no write
//	Renew, tenure acquired elsewhere    3  read-only Txn, then LeaseTimeToLive (the keys
//	                                       on its lease), then keep-alive; no write
//	                                       (2 once this Locker knows the lease)
//	Renew of one tenure of a group      1  as Renew, another ttl: it moves
//	Renew, another ttl                  1  Txn + keep-alive; LeaseRevoke*, LeaseGrant*
//	Renew of a lost tenure              1  Txn (or keep-alive + read-only Txn)
//	RenewBatch of n tenures             1  a keep-alive per etcd lease (one per group)
//	                                       + ⌈n/128⌉ read-only Txns (3 for tenures
//	                                       acquired elsewhere: reads, LeaseTimeToLives,
//	                                       keep-alives)
//	Release                             1  Txn; the tenure's lease goes back to the pool
//	                                       (LeaseRevoke* when it cannot, see above); with
//	                                       a mark in line, then a Put of the pass key
//	                                       that names the chosen waiter (2 in all)
//	Release of a lost tenure            1  Txn
//	Inspect                             2  Range, then LeaseTimeToLive; 1 when free
//	List                                1 + one LeaseTimeToLive per tenure
//	ForceRelease                        2  DeleteRange, then LeaseTimeToLive; LeaseRevoke*
//	                                       (when this Locker put the tenure on a lease
//	                                       of its own)
//	AcquireOrWait, free name            1  Txn (puts the tenure, deletes the mark) +
//	                                       keep-alive of the tenure's lease (and of the
//	                                       mark's with Keep, which puts the mark anew);
//	                                       with Fair the Txn also compares that the mark
//	                                       is first (TestFairTurnIsOneRoundTrip)
//	AcquireOrWait, Fair, free name,     2  Txn (places the mark when there is none),
//	  another waiter first                 then LeaseTimeToLive of the first mark's lease
//	                                       + keep-alive of the mark's lease
//	AcquireOrWait, held by another      2  Txn (places the mark when there is none),
//	                                       then LeaseTimeToLive + keep-alive of the mark's
//	                                       lease
//	  again, until the holder's time    2  Range + keep-alive of the mark's lease, then
//	    is up                              LeaseTimeToLive; no raft entry at all
//	StopWaiting                         1  Txn (deletes the mark; puts the pass key when the
//	                                       mark was first and the name free); 2 when the
//	                                       Locker does not know its mark: Range, then Txn
//	Watch, WatchTurn                    1  Range (the key), then two watch creations on the
//	                                       stream; 0 when a Watch of the name on this Locker
//	                                       ran within 30s
//	a release (or a pass), per Locker   0  when the Release named its choice (a pass key
//	  with a turn Watch on the name        put within 300ms); 1 Range at the release's
//	                                       revision (the first mark) for a deletion that
//	                                       names nobody (expiry, ForceRelease); 0 for a
//	                                       Locker with only plain Watches
//	Stop of a Watch                     0  (the etcd watches linger, see below)
//
// "Txn" is the call's own transaction; concurrent calls' transactions and
// reads are sent together (see above), so under load there are fewer.
//
// Renew keeps the tenure's etcd lease alive, so a holder that renews with
// the ttl it acquired with (as lease.Run does) writes nothing to etcd's
// log. etcd refuses to keep an expired lease alive, so Renew never revives
// an expired tenure. A keep-alive restarts a lease with the TTL it was
// granted, so a Renew with a ttl that needs another TTL moves the key onto
// a new etcd lease. No etcd lease outlives its tenure other than as a
// spare in the pool: Release recycles the lease or revokes it, and a Renew
// or re-entrant Acquire to another ttl revokes the lease it leaves behind.
// The exceptions are failures without an answer, where the etcd lease
// concerned is left to expire after its TTL (see "The lease invariant"):
// revoking a lease that a lost Acquire or Renew may have attached could
// end a tenure whose holder still trusts its Deadline, and it is a
// Release's reply that names the lease to revoke.
//
// # What a renewal proves, and why it reads
//
// A Renew succeeds only on two answers of one round trip: a keep-alive of
// the lease L the Locker last saw the tenure t on, answered with a TTL
// (etcd still had L and restarted it), and a linearizable read of t's key
// that finds t intact on L (create revision = Token, value = owner, lease
// = L). judgeRenewal (renew_release.go) is the one place that turns these
// two answers into an outcome, for Renew and RenewBatch alike. Both were
// applied within the call, the keep-alive at some moment K and the read
// at some moment R. If K ≤ R, t was on L at every moment of [K, R]: no
// write puts a tenure back on a lease it left (a move takes a lease no
// earlier move named, and a lease a tenure left by another's write is
// revoked, never reused, see "The lease invariant"), so the keep-alive
// restarted t's own lease, and the Renew takes effect at K. If R < K, t
// was intact at R, and the Renew takes effect at R: a write that took t
// off L between R and K (another's Release, move or ForceRelease) comes
// after it, and its effect stands, as in any sequence of the two calls. A
// serializable read would not do: a member's own view may be older than
// the call, when it lost its leader or lags behind.
//
// A keep-alive alone proves less: that etcd still has L, not that t is on
// it. etcd ends a key with its lease, but a key also leaves a lease that
// lives on, in ways the renewing Locker does not see: a Release, or a
// Renew to another ttl, of the same tenure through another Locker (a
// Lease handed to another process), which delete the key or put it on
// another lease in a transaction that checks owner and Token; and a
// ForceRelease, from any Locker, which deletes the key whoever holds it.
// The Locker that does it cannot end L in the same step: etcd has no
// conditional LeaseRevoke and no revoke inside a transaction; a revoke
// before the write is unsafe (between the read that found L and the
// revoke, L's tenure may have been released and L recycled by its own
// Locker for the next tenure, or L may carry other tenures of a group);
// and a revoke after the write leaves a moment in which a keep-alive
// renews a tenure that has already ended. So a Renew by keep-alive alone
// would tell a holder whose tenure an operator force-released, or that
// another process released or moved, that it still holds it, and go on
// telling it so at every renewal while the name has another holder
// (TestRenewBatchGivesRenewsAnswers makes exactly this case). A
// concurrency.Mutex renews with one message because a Session's keys are
// not owner-checked: Unlock deletes whatever key is there (etcd issue
// 22082), and nothing ends a Session's key but its owner or its lease.
//
// So a renewal is one round trip of two messages sent together, a
// keep-alive on an open stream and a read-only Txn, never more: neither
// waits for the other (the read may wait for a shared read transaction
// under way, see reader).
// The read costs etcd a linearizable read (on a one-member cluster, no
// raft round); the keep-alive, nothing in raft's log.
//
// # Waiting fairly
//
// Fair waiting (lease.Run's WithFairWait) is a policy over the same line
// of marks, not a line of its own: AcquireOrWait with Mark.Fair adds to
// its transaction's comparison that the name is free a comparison that
// the waiter's mark is there with the create revision the Locker knows
// and that no mark of the name was created before it (a range compare),
// or, when the Locker knows no mark of the waiter's, that the line is
// empty. When the name is free but another waiter is first, the same
// transaction places or reads the waiter's mark, as for a held name, and
// reads the first mark; the answer has no owner and the time that mark's
// etcd lease has left (one LeaseTimeToLive, alongside the keep-alive of
// the waiter's mark, as for a holder's time). Plain Acquire never looks
// at the line.
//
// # Many leases
//
// RenewBatch (which lease.Run's renewer uses for every Run on a Locker)
// renews any number of tenures in one round trip: one keep-alive per
// etcd lease, sent back to back over the Locker's keep-alive streams,
// with the reads that check the tenures in transactions of 128 reads
// each, all at once. Tenures acquired in a burst share leases (see above),
// so ten thousand Runs started together cost about eighty keep-alives and
// eighty reads per sweep, where a lease per tenure cost ten thousand
// keep-alives. Writes queue in the Locker rather than in etcd, which
// refuses proposals ("etcdserver: too many requests") once thousands wait
// to be applied: transactions go out at most 32 shared ones at a time
// (see writer), the grants that Acquires share one at a time per TTL, and the
// other calls that grant or write (pool refills, moves) at most 64 at
// once. A small queue on etcd's side also keeps
// renewals fast during a burst of Acquires: a linearizable read (the
// check of a renewal) waits until etcd has applied every write committed
// before it.
//
// # Restarts
//
// etcd keeps its leases on disk, and the member that becomes leader (after
// a restart of the cluster, or when the leader fails) restarts every
// lease's TTL. So a tenure survives a restart or a change of leader, and
// one nobody renews ends about its TTL after the new leader took over:
// later than it would have, never earlier, so no other owner gets the
// name before its holder's Deadline. While the cluster is down or without
// a leader, calls fail as store errors by their context's deadline; a
// holder that renews before its Deadline (lease.Run retries) keeps its
// tenure and its Token. Tokens keep growing across restarts: revisions
// are on disk too. TestRestartKeepsTenures and TestLeaderKillKeepsTenures
// show it.
//
// # Errors
//
// A failure of the cluster or the network (no leader, unreachable
// endpoints, a lost reply) or of the context is returned wrapped, with the
// operation and name, and never matches lease.ErrHeld, lease.ErrLost or
// lease.ErrNotHeld. Like every etcd client call, the Locker's calls wait
// for an unreachable cluster for as long as their context allows: give
// them a deadline. Every call returns by the time its context ends.
//
// # Lost replies
//
// etcd's client (clientv3) resends a request on its own in two cases
// only. Requests that change nothing, or that are harmless to repeat
// (Range, LeaseGrant, LeaseRevoke, LeaseTimeToLive), it resends when they
// fail as unavailable. A write (Txn, Put, DeleteRange) it resends only
// when it cannot have been applied: no connection was there to send it on
// ("there is no connection available"), or the server refused it before
// applying it (an expired auth token, a learner member); or when it failed
// as canceled or timed out while the caller's context was still live,
// which a request the server received cannot do: the server's deadline is
// the caller's remaining time counted from the request's arrival, never
// earlier than the caller's, and etcd reports its own timeouts as
// unavailable. A write whose reply is lost in the network (a reset, a
// dropped connection) fails with codes.Unavailable and is not resent
// (client/v3 retry.go and retry_interceptor.go, v3.7).
//
// So the outcome of every call is exact: a Release whose reply was lost
// returns a store error, never lease.ErrLost, although etcd may have
// applied it; a resend that found the tenure gone would report ErrLost,
// and none happens. The tenure may then have ended or not: a caller that
// retries such a Release gets ErrLost if the first attempt had ended it
// (lease.Run does not retry: it reports the store error, and the tenure
// expires on its own if it was not released). An Acquire or Renew whose
// reply was lost is safe to retry with the same owner: a re-entrant
// Acquire keeps the Token.
//
// # Restores and wiped data
//
// Tokens are etcd revisions, which live in the cluster's data. If that
// data is lost and the cluster is created again empty (every member's
// data directory wiped), revisions, and so tokens, start again from 1;
// restoring a snapshot (etcdutl snapshot restore) takes them back to the
// snapshot's revision, so tokens issued since the snapshot are issued
// again, unless the restore is given --bump-revision greater than the
// number of revisions made since the snapshot (with --mark-compacted), as
// Kubernetes operators do for the same reason. Either way the tenures
// themselves are lost, as in a Redis failover, so two holders may briefly
// both believe they hold a lease; a fenced system that refuses tokens
// smaller than the largest it has seen then refuses the new holders'
// writes (safe, but the work stops) until their tokens pass the old ones,
// or until its high-water mark is reset. The holders of the lost tenures
// get lease.ErrLost from their next Renew (TestWipedDataTokensGoBack).
//
// The Locker does not floor its tokens against this. A floor must outlive
// the data it protects, and etcd offers nothing outside its data: a floor
// kept in a key is wiped with it, etcd has no clock a client could read
// (the Redis backend floors its tokens with the server's TIME), and a
// floor from this process's clock would make tokens depend on skewed
// application clocks, which the contract rules out. It would also part the
// Token from the create revision that every owner-checked transaction
// compares, costing round trips.
//
// # Waiting: Watch
//
// The Locker is a driver.Watcher, so lease.Run's WithWait (and the election
// package) wake when a busy name becomes free instead of polling. Watch
// reads the name's key (one linearizable read-only transaction) and puts
// an etcd watch on it from the revision after that read, so a deletion
// after Watch returns is never missed, even one that reaches etcd before
// the watch does. Its channel receives on every deletion of the key: a
// Release, a ForceRelease, and an expiry, since etcd deletes the key when
// the tenure's etcd lease runs out (within the expiry lag above); and on
// a put that shows another tenure than the one last seen (whose end was
// then not seen). Renewals do not wake it: a keep-alive is no event, and
// a Renew that moves the key keeps its create revision. A deletion also
// tells the Locker that the name is free, so the woken Acquire writes at
// once without reading first.
//
// All the Watches of a name on one Locker share one subscription: an etcd
// watch on the name's key and one on its pass key (below), followed by
// one goroutine. When the last of them stops, the subscription lingers, for
// 30s without a Watch, so that Stop sends nothing (no cancellation on the
// stream inside a handoff) and the Locker's next Watch of the name sends
// nothing either; past 1024 lingering subscriptions the one idle longest
// ends, and Close ends them all. All the etcd watches of a Locker share
// one clientv3.Watcher of the Locker's own and one gRPC Watch stream
// (their contexts carry the same metadata, which is how clientv3 groups
// watches into streams); clientv3 resumes a watch from its last revision
// when the stream breaks, so a dropped connection delays a wake-up and
// loses none. The watches are made with clientv3.WithRequireLeader, so a
// member cut off from its cluster cancels them rather than going quiet.
// When etcd cancels a watch (its revision was compacted, the member lost
// its leader) the subscription wakes its Watches, reads again, watches
// from the new revision and wakes them once more: a spurious wake-up,
// never a missed one.
//
// # Waiting in line: the store's WatchTurn and AcquireOrWait
//
// The Locker keeps a line of waiters per name (driver.TurnWatcher), so
// that a release wakes one waiting Locker instead of every process that
// waits (lease.Run's WithWait and WithFairWait wait in it). A waiting
// Locker's mark is a key
//
//	<prefix>\xffw<name>\xff<waiter>\xff<seq>
//
// on an etcd lease of the mark's own, granted for the call's Mark.Life
// rounded up to whole seconds (and to etcd's minimum), which each
// AcquireOrWait that finds the name busy keeps alive: the mark lapses its
// life after the Locker last asked, by etcd's clock, when etcd deletes it
// with its lease, and a Locker that dies leaves nothing that lasts
// longer. A call with another life moves the mark onto a lease of that
// life, keeping its create revision, in its transaction. AcquireOrWait is
// Acquire's one transaction with more in its branches: when the name is
// held by another owner, it puts the mark if the waiter has none (a
// nested transaction); when it acquires or re-enters, it deletes the mark
// or, with Keep (other callers of the Locker still wait), puts it anew
// under another seq, at the back of the line.
//
// etcd runs no logic at a release, so the choice is the first mark as of
// the release's revision R, which every Locker can read (see "The line
// invariant"). A Release's transaction reads it after deleting the key,
// and when there is one the releasing Locker names it in a put of the
// name's pass key ("\xff<R> <waiter>", on the mark's etcd lease): one
// request, where each waiting Locker reading the choice would cost one
// Range each (TestReleaseNamesTheChoice). Each Locker's subscription to
// a name watches its key: a deletion wakes the plain Watches at once,
// and the turn Watches of the waiter the put names; without such a put
// within choiceGrace (an expiry, a ForceRelease, a Release by an older
// version, a put that failed) the Locker reads the first mark as of R
// itself (chosen), which is the same decision. A read that fails (R
// compacted, the cluster gone) wakes every turn Watch: a wake-up more,
// never one lost. A Locker's own watch of the marks would not do: it is
// complete up to R only once an event past R reached it; the previous
// design decided from that view and two Lockers could wake different
// waiters for one release (TestTurnChoiceIsOneDecision).
//
// StopWaiting is one transaction that deletes the mark and, when the name
// is free and the mark is first (firstInLine), puts the name's pass key
//
//	<prefix>\xffp<name>
//
// on the mark's etcd lease, so it ends with it. Every subscription
// watches that key too and judges its put as a release (without waking
// plain Watches): the turn Watches of the next mark's waiter wake at once,
// or every turn Watch when no mark is left (TestStopWaitingPassesTheTurn).
// The marks and the pass keys start with the byte 0xff, which valid UTF-8
// never holds, so they are never tenure keys and List leaves them out.
//
// # URLs
//
// Importing the package registers the "etcd" and "etcds" (TLS) schemes
// with lease.Open:
//
//	etcd://[user:password@]host:port[,host:port...][?prefix=P&dial_timeout=D]
//	etcds://host:port[,host:port...]?cacert=/ca.pem&cert=/client.pem&key=/client-key.pem
//
// The user and password, if given, are etcd's authentication. The query
// parameters are:
//
//	prefix        the key prefix (default "lease/"); must not be empty
//	dial_timeout  how long Open waits for the cluster to answer, a Go
//	              duration such as 5s (default 5s)
//
// and on etcds:// URLs:
//
//	cacert        PEM file of the CAs that signed the servers' certificates
//	              (default: the system's)
//	cert, key     the client certificate and its key, for --client-cert-auth
//	server_name   the name checked in the servers' certificates
//	skip_verify   true checks nothing (for tests)
//
// Any other parameter is an error (TLS parameters on an etcd:// URL say to
// use etcds://). Open checks that the cluster answers
// (one linearizable read) within dial_timeout and its context, so an
// unreachable cluster, or one without a leader, fails Open rather than the
// first call. The Locker that Open returns owns its client and closes it
// on Close; one made by New with the caller's client never closes it. For
// any other client setting, make the clientv3.Client yourself and use New.
package etcdlease
