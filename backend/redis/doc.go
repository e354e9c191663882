// Package redislease keeps leases in Redis, over
// github.com/redis/go-redis/v9. Its directory is backend/redis; the
// package is named redislease so that it does not clash with go-redis's
// package redis, which its users import alongside it.
//
// Use New with your own redis.UniversalClient (single node, Sentinel
// failover, Cluster or Ring; Close leaves it open), or Open with a URL (the
// Locker owns that client). Importing the package registers the "redis"
// and "rediss" schemes with lease.Open, and their Sentinel and Cluster
// forms (see Open):
//
//	import _ "github.com/leasekit/lease/backend/redis"
//	l, err := lease.Open(ctx, "redis://127.0.0.1:6379/0?prefix=myapp:lease:")
//
// # Deadlines
//
// Every call returns by its context's deadline (plus the few milliseconds
// the runtime needs to notice), with an error matching the context's
// error, never an outcome such as lease.ErrHeld or lease.ErrLost: a store
// that stops answering costs a caller its deadline, not go-redis's read
// timeout. That needs a client built with go-redis's
// ContextTimeoutEnabled, which Open's client is; for your own client, see
// New. Open itself is bounded by its context, and fails by then when the
// server accepts connections but does not answer.
//
// # URL query parameters
//
//	prefix              key prefix (default "lease:"); no '{' or '}'
//	protocol            RESP version, 2 or 3 (go-redis option)
//	client_name         CLIENT SETNAME of each connection
//	max_retries         retries of a failed command (-1: none)
//	dial_timeout        e.g. 5s
//	read_timeout        e.g. 3s (-1: none; a context deadline still applies)
//	write_timeout       e.g. 3s (-1: none; a context deadline still applies)
//	pool_size           most connections (default 10 per CPU)
//	pool_timeout        wait for a free connection
//	min_idle_conns      connections kept open
//	max_idle_conns      idle connections kept at most
//	conn_max_idle_time  close connections idle this long
//	conn_max_lifetime   close connections this old
//	skip_verify         rediss only: do not verify the server certificate
//
// Durations are Go durations or whole seconds, as in redis.ParseURL. The
// user, password and database number come from the URL as in
// redis.ParseURL (redis://user:password@host:6379/3; escape '#', '@', '/'
// and '?' in a password). Any other parameter, or a bad value, is an error
// matching lease.ErrInvalid, and no error ever quotes the password. For
// Sentinel or Cluster by URL, see Open; for any other client, build it
// yourself and use New.
//
// # Keys
//
// Each name has keys that share one Redis Cluster hash slot:
//
//	<prefix>{<base64url(sha256(name))>}:lease             hash of name, owner, token, acquired; expires by PEXPIRE
//	<prefix>{<base64url(sha256(name))>}:token             the name's last token; expires 10 minutes after the server's clock passes it
//	<prefix>{<base64url(sha256(name))>}:released:<token>  the nonce of the Release that ended that tenure; expires after a minute
//	<prefix>{<base64url(sha256(name))>}:marks             waiting Lockers' marks by placement (see "Waiting" below); expires with the last mark
//	<prefix>{<base64url(sha256(name))>}:lapses            when each mark lapses; expires with the last mark
//
// The hash tag is a digest, so any name (braces, NUL, 1024 bytes) gives
// fixed-length keys; the full name is stored in the lease hash and checked
// by every script. A token key outlives its lease by at most 10 minutes
// past the instant the server's clock passes its token (see "Tokens"
// below): a name that is not used leaves nothing behind after that, so
// the keys at rest are one per name used in the last 10 minutes. Release
// markers exist only for resends (see "Round trips" below) and
// are read by nothing else: a released name is free at once.
//
// The hash's acquired field is the server's TIME, in microseconds, when
// the tenure began; every script returns it, and it is Lease.Acquired. A
// hash written by a version before the field existed reads with a zero
// Acquired until its tenure ends.
//
// # Round trips, clock and tokens
//
// It needs Redis 4.0 or later (tested with Redis 7.0) or another server
// that runs Redis Lua scripts with TIME, such as miniredis.
//
// Acquire, Renew, Release, Inspect and ForceRelease each run one Lua
// script (acquire.lua, renew.lua, release.lua, inspect.lua,
// force_release.lua in this directory; release.lua and force_release.lua
// after marks.lua) as one EVALSHA: one round trip, or two the first time a
// server lacks the script (EVALSHA, then EVAL). So do a waiting
// caller's attempts (marks.lua, wait.lua and acquire.lua in one script)
// and the mark's removal when a Locker stops waiting (unmark.lua); the
// watches are described under "Waiting" below. Open loads every script up
// front.
//
// The Locker's RenewBatch (which lease.Run renews through) runs renew.lua for every
// tenure, as Renew does, in pipelines of up to 1000 EVALSHA (one round
// trip each; a Cluster or Ring client splits a pipeline by node and sends
// the parts at once), and resends the items a server answered NOSCRIPT as
// EVAL in one more pipeline. lease.Run's renewer sends the renewals of all
// Runs on one Locker this way: 10,000 held leases cost 10 to 20 round trips
// per sweep instead of 10,000 (TestRenewBatchRoundTrips counts them;
// LEASE_REDIS_SCALE=10000 go test -run TestRenewSweepScale times a sweep).
//
// Concurrent Acquires, Renews and Releases of one Locker share round trips
// too (pipeline.go). A call that finds fewer than two of them on the wire
// sends its script at once, alone; while two are, later calls wait, and
// the next to get a turn sends every waiting call (up to 128) as one
// pipeline, each script doing exactly what it does alone. Redis spends
// most of a short script's time reading the request and writing the reply,
// so this lowers the server's and the client's work per call, at the cost
// of up to one more round trip of waiting for a call that arrives while
// two are on the wire (TestConcurrentCallsShareRoundTrips; bench/ measures
// it). A call whose context ends while it waits returns its context's
// error and is never sent.
//
// go-redis resends a request whose connection failed or timed out (up to
// its MaxRetries). Acquire and Renew are safe to resend: a re-entrant
// Acquire keeps the token, a second Renew extends again. Release is made
// exact: each call sends a nonce of its own, and when release.lua ends the
// tenure it leaves the nonce in the tenure's release marker, so a resend
// whose first attempt already ended the tenure reports the release rather
// than lease.ErrLost. A second, separate Release of the same lease carries
// another nonce and reports lease.ErrLost, as the contract requires.
//
// Expiry is Redis's own: the lease key's PEXPIRE, with the ttl rounded up
// to whole milliseconds. Lease.Expires and HeldError.Remaining come from
// the server's TIME and the key's PTTL, never from this process's clock.
//
// # Tokens
//
// A new tenure's token is the server's TIME in microseconds, or one more
// than the name's last token when that is not below the clock (a second
// tenure of the name within a microsecond, or a clock stepped back). The
// same script stores the token in the name's token key, which expires 10
// minutes after the server's clock passes the token (SET ... PX, in the
// same call that reads the key it replaces: SET ... GET on Redis 6.2 and
// later, a GET and a SET before that). Re-entrant Acquires, Renew,
// Release and ForceRelease leave the key alone.
//
// Tokens of a name strictly increase, provided that
//
//   - the server's clock never steps back by more than 10 minutes, and
//   - a server that answers without the key it should have (after
//     FLUSHALL, a restart without persistence, a failover to a replica
//     that missed the write) has a clock that is past every token the
//     lost key held: its clock is not behind the clock that issued them
//     by more than the time the loss took (a restart or failover takes
//     longer than the servers' clock skew), and the lost tokens were not
//     ahead of their clock (they are, by a microsecond per tenure, only
//     when one name starts tenures faster than one a microsecond).
//
// Why: let c be the name's last token. While its key holds c, the next
// token is at least c+1. Redis drops the key only once its own clock,
// the one TIME reads, has passed c plus 10 minutes (the expiry is set
// from that clock, less the microseconds the script itself runs, and only
// a larger token replaces the key; a version before this one rewrites it
// without an expiry, which keeps it longer); from then
// on, a clock that never steps back by more than 10 minutes reads above
// c, so a token taken from it is above c too. A tenure held for longer
// than 10 minutes loses its key before it ends, and that is covered the
// same way: the key's expiry is counted from the token, not the tenure.
// A key lost early is the second case above. So the key is kept exactly
// while the clock alone might not be enough (plus the 10 minutes of
// margin against a clock stepped back, which NTP does only for offsets
// beyond 128ms, and a leap second for one second), and nothing about a
// name is kept for longer.
//
// Tokens are about 1.8e15 today and stay below 2^53 until the year 2255.
//
// # Failover
//
// Redis replication is asynchronous: after a failover the new primary may
// lack a tenure the old one granted, and grant the name again. The tokens
// still grow (see above), so a fenced write from the old holder is
// rejected, but two holders may briefly both believe they hold the lease.
// Where that matters, use a store with consensus (etcd) instead. A
// failover or FLUSHALL can also drop a release marker: a Release whose
// reply was lost just then, and whose resend reaches a server without the
// tenure and without the marker, reports lease.ErrLost.
//
// # Waiting
//
// Callers wait for a busy name with lease.Run's WithWait or WithFairWait
// (and the election package): they wake when the name is released instead
// of polling. Every
// Release or ForceRelease that ends a tenure publishes, inside its own
// script (still one EVALSHA; the server runs one PUBLISH more), to the
// name's channel:
//
//	<prefix>{<base64url(sha256(name))>}:free
//
// which has the hash tag of the name's keys. Watch subscribes to that
// channel on one pub/sub connection per Locker, shared by all its Watches
// (one subscription per name, however many Watches are on it), and
// returns once Redis has confirmed the subscription, so no release after
// Watch returns goes unheard while the connection holds. Pub/sub is
// fire-and-forget, so when that connection drops (a read error, or two
// unanswered pings 2s apart on a silent one) every Watch wakes, the
// Locker opens a new one and subscribes again, and every Watch wakes once
// more when Redis confirms: a release while the connection was down costs
// a spurious wake-up, never a missed one. Watch gives up after 5s without
// a confirmation, and lease.Run then polls; while a waiter watches, Run
// still tries again at least every 2s.
//
// Stopping a Watch sends nothing. When the last Watch of a name stops,
// its subscription stays, idle, and a later Watch of the name uses it at
// once, without a round trip; a message on it wakes no one. The goroutine
// that reads the connection drops the subscriptions idle for 30 seconds,
// many in one UNSUBSCRIBE, and keeps at most 1024 idle ones (beyond that
// the oldest go at once, in one UNSUBSCRIBE); Close drops them all with
// the connection.
//
// A release wakes one waiting Locker, not every process that waits. The
// callers of one Locker that wait for a name (WithWait and WithFairWait
// alike) form its line for the name, in the order they came, and that
// line is the near end of the store's: the Locker has one mark in it, one
// turn watch of the name (set up at its first waiting attempt, on the
// same subscription as a Watch), and only its first waiter asks Redis;
// the others are answered from its last answer, without a round trip,
// until they are first. Each attempt of that first waiter that finds the
// name held leaves the Locker's mark (its random waiter ID) in the name's
// :marks sorted set, scored by the server's TIME in microseconds when it
// was first placed, with the instant it lapses in :lapses: three of the
// waiter's retry intervals (lease.Run's is a quarter of the ttl, from
// 50ms to 2s), rounded up to a whole millisecond, on from the server's
// TIME. The same script then attempts the acquisition, so it is one round
// trip, as Acquire is. An attempt that acquires removes the mark, or
// places it at the back again when more callers of the Locker still wait,
// so that Lockers take turns. Release and ForceRelease drop the lapsed
// marks, choose the live one placed first, and publish
//
//	<token> <waiter ID>
//
// or the token alone when no mark is live. The turn watch wakes the
// Locker's first waiter only at a message that names its waiter ID or
// names none (and at every drop of the connection); a plain Watch wakes
// at every message.
// A version of this package before marks publishes the token alone, so in
// a fleet of mixed versions its releases wake every waiter, and its
// Watches wake at every release of the new one: mixed versions herd as
// before, but no waiter misses a release. When the first waiter of a
// Locker gives up, the next one is first at once; when the Locker's last
// waiter of a name leaves while it has a mark, the Locker takes the mark
// away in one round trip (unmark.lua); if a release had chosen it (its
// mark was first and the name is free), that passes the turn on to the
// next mark ("passed <waiter ID>"). Both mark keys expire when their last
// mark lapses, so a waiter that dies leaves nothing for longer than its
// mark's life, and costs the others at most that (lease.Run's waiters
// also try again at their retry interval, at most every 2s).
//
// Fair waiting (WithFairWait) is a policy over the same marks, not a line
// of its own: an attempt with the fair policy takes a free name only when
// the Locker's mark is the first live one, or no mark is live; otherwise,
// in the same script, it acquires nothing, places or renews the mark as
// for a held name, and answers with no holder and the time the first mark
// has left. A plain Acquire, and a waiter without the policy, take a free
// name whatever the line. Versions before this one kept fair
// waiters in a separate queue (keys :queue and :places, which expire on
// their own): in a fleet of mixed versions the two kinds of fair waiter
// do not see each other's order, and turn Watches ignore the old queue's
// "dequeued" messages.
//
// The line's invariant: a name's line is its live marks in the order of
// their :marks scores, and the waiter first in line is the live mark with
// the lowest score, as marks_first (marks.lua) finds it by the server's
// TIME. A mark joins at the back (its score is above every other mark's,
// even when the clock stands still or steps back), keeps its score while
// it is renewed, and is out of the line once its lapse in :lapses has
// passed, for every script at once; the next script that reads the marks
// drops it, and both keys expire with the last mark. Every decision of
// whose turn it is (whom a release or ForceRelease names, to whom
// StopWaiting passes the turn, whom the fair policy lets take a free name)
// is marks_first's answer inside the one script that acts on it, and
// scripts run one at a time: so the waiter a release wakes is the waiter
// the fair policy then lets in, until its mark lapses and the next mark
// is first for both.
//
// Expiry publishes nothing (the Locker does not rely on keyspace
// notifications, which are off by default and not delivered across a
// Cluster): a tenure that expires wakes no Watch, and lease.Run's waiting
// covers it by trying again at the holder's remaining time, which every
// busy Acquire reports. The pub/sub connection and the goroutine that
// reads it live from the first Watch until Close. A Ring client cannot
// watch (its pub/sub connection would reach one shard): there
// lease.Can[driver.Watcher] is false, Watch reports errors.ErrUnsupported,
// lease.Run's WithWait polls, and WithFairWait fails at once with an
// error matching errors.ErrUnsupported.
//
// # Errors
//
// A failure of the request (refused connection, timeout, READONLY replica,
// a script error, a lease key overwritten by something else) is returned
// wrapped with %w and matches none of the lease sentinels; a call whose
// context ended also matches the context's error. An Acquire that failed
// that way may have succeeded: retry it with the same owner, which is safe
// since a re-entrant Acquire keeps the token.
package redislease
