// Command bench measures lease beside the locks people use today, on the
// user's own servers, in one run, and prints ratios:
//
//	cd bench
//	go run . -redis redis://127.0.0.1:6379/0 \
//	    -postgres 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	    -mysql mysql://root@127.0.0.1:3306/test -etcd 127.0.0.1:2379 -mode all
//
// -mode net runs cycle, renew and busy over emulated links (a delaying
// proxy): see "The networked setting" below.
//
// It is a module of its own, so that the lease module never depends on
// the peers it is measured against; its go.mod replaces
// github.com/leasekit/lease with the working tree (../), so it measures
// the code beside it. go run . -h lists the flags.
//
// # How it measures
//
// Lease and its peers run on the same servers, on one shared client per
// store (the same go-redis client, the same database/sql pool, the same
// etcd client), so pool sizes and settings are equal by construction.
// Each measurement runs every contender in turn, in an order that rotates
// every round, for -rounds rounds, and reports the median. Every ratio is
// arranged so that a value above 1 favours lease: lease/peer for rates,
// peer/lease for round trips and latencies. The header has the Go
// version, OS, CPU count and the load average (/proc/loadavg) at the
// start, and the footer the load average at the end: speed is only
// comparable within one run. Every key and table a run makes has a random
// "leasebench" prefix and is removed at the end; nothing is flushed.
//
// # Modes
//
//   - cycle, renew, busy: Acquire+Release of a free name, Renew of a held
//     tenure, Acquire of a name another owner holds; -workers workers
//     (default 8), each on its own name, for -time per round. Under each
//     table, every side's CPU time per operation over its rounds: in this
//     process (getrusage: the library's Go code and the driver) and in the
//     server, read from Redis's INFO cpu, from etcd's /metrics
//     (process_cpu_seconds_total; of the first endpoint's member only, and
//     not over TLS), and for PostgreSQL and MySQL/MariaDB, which have no
//     such counter, by summing the postgres or mariadbd/mysqld processes
//     in /proc when the server is on this machine. With the share of a CPU
//     each side kept busy, it tells a ratio bound by the server's work
//     from one bound by the client's, or by waiting.
//   - contention: -contenders workers on one name, each acquires, holds
//     for -hold, releases, and retries a busy name after a random wait up
//     to -hold. Every holder counts itself in an in-process holder count
//     (a second holder is a violation) and, where the implementation has
//     a fencing token, writes it to an in-process register that refuses a
//     token not above every earlier one (a refusal is a violation).
//   - rtt: round trips per operation, counted by a TCP proxy in this
//     command (turns of the conversation: each time the client speaks
//     after the server did) for Redis and SQL, and as RPCs plus stream
//     messages by a gRPC interceptor for etcd (on one multiplexed HTTP/2
//     connection, turns are not requests). Lease is opened here with the
//     backend's own URL opener, as lease.Open opens it, so the count
//     includes what its pool does (a health check after idle, say).
//   - scale: -scale-n concurrent lease.Run jobs on one Locker per store
//     (ttl -scale-ttl, each holding -scale-hold), reporting kept, lost and
//     other outcomes, peak goroutines and heap (runtime/metrics), memory
//     per held lease, and the round trips one renewal sweep of all jobs
//     costs (counted as in rtt while every job holds).
//   - handoff: -waiters callers wait for a held name; the holder returns
//     from its work and releases, and each next holder records the time
//     from the previous holder's return to its own start (so the release
//     is inside the latency), and the store operations per handoff.
//
// # The networked setting (-mode net)
//
// Every other mode runs on loopback, where client and store share the
// machine's CPUs and a ratio measures CPU. In production the store is on
// another host and round trips decide. The net mode repeats cycle, renew
// and busy over emulated links, lease beside its peers in the same
// interleaved rounds, at each worker count of -workers-list (default
// 1,8,64) over each link of -rtt-list (default loopback,0.5ms,2ms):
//
//	cd bench
//	go run . -redis redis://127.0.0.1:6379/0 \
//	    -postgres 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	    -mysql mysql://root@127.0.0.1:3306/test -etcd 127.0.0.1:2379 \
//	    -mode net -time 2s -rounds 5
//
// and for a short run, -workers-list 1,8 -rtt-list 0.5ms -time 1s
// -rounds 3. A link is "loopback" (or 0: straight to the store, no
// proxy), "proxy" (through the proxy with no delay: what the proxy itself
// costs) or a round-trip time the proxy adds, such as 0.5ms.
//
// It prints a summary shaped like issue 34's table: a row per worker
// count and link, a column per store and operation, each cell the ratio
// lease/peer of ops/s, against the peer people would otherwise use:
// bsm/redislock on Redis, the durable row floor on PostgreSQL and
// MySQL/MariaDB, concurrency.Mutex for etcd's cycle and busy and the
// keep-alive on an open stream for etcd's renew. Only that peer is
// measured beside lease unless -all-peers. A detail table under it has
// both rates of every pair. The summary's notes have, per link and
// store, the measured round trip (the median, minimum and maximum of 20
// trivial round trips through the link: Redis PING, SELECT 1, a
// serializable etcd Get) beside the delay the proxy adds, and per link
// and worker count the load average at its start and end and the CPU
// this process (the clients) and the proxy process used.
//
// The proxy is this command's counting proxy (proxy.go) with a delay
// (proxy_delay.go), run in a child process (this command run again, see
// proxy_process.go) so that its CPU time is its own, read from
// /proc/<pid>/stat, and its goroutines do not share the clients'
// scheduler. It listens on a loopback port per store address and the
// clients dial it instead of the store (etcd's client has the proxy as
// its one endpoint; gRPC runs over it unchanged). Per connection and
// direction a reader goroutine stamps each read with its arrival time and
// queues it, and a writer goroutine writes it, in order, at arrival + RTT/2:
// bytes keep their order and TCP's semantics (a half-close is passed on
// when due, after the bytes before it), back-to-back requests stay back
// to back (the delay is latency, not a turn), and nothing limits the
// throughput but a queue of 1024 reads per direction. The writer waits on
// a timerfd through Go's poller, since time.Sleep rounds waits under a
// millisecond up to about a millisecond on Linux; elsewhere it uses a
// time.Timer. The child ends when its stdin closes (at the end of each
// link, or when this command dies), closing every connection.
//
// Its limits: this machine's kernel has no netem, so this is not a
// network: the delay is added to loopback TCP, and the stores still share
// the machine's CPUs with the clients and the proxy (whose CPU the notes
// show). The proxy's own forwarding (two more loopback hops and a wakeup
// each way) adds to the round trip: about 0.1–0.2ms on a loaded 2-CPU
// machine, which is why the measured round trip is printed beside the
// configured one (a 0.5ms link measured about 0.67ms). There is no loss,
// jitter, bandwidth limit or reordering, and no delay on connecting
// (the TCP handshake with the proxy is local; the store's own handshake
// is delayed like any bytes). The servers are used as the other modes
// use them: nothing is flushed or restarted, and everything the run makes
// has its random prefix and is removed at the end.
//
// # What each side sends per operation
//
// Redis (each on the shared go-redis client):
//
//	lease                   Acquire, Renew, Release: one EVALSHA of a script each (see rtt)
//	bsm/redislock           Obtain: EVALSHA (SET NX PX, else GETRANGE); Refresh: EVALSHA (GET, PEXPIRE);
//	                        Release: EVALSHA (GET, DEL); a random 16-byte token per Obtain
//	go-redsync/redsync v4   one pool (goredis v9 adapter), so a quorum of 1; Lock: SET NX PX from a
//	                        goroutine per pool, and after a failed try EVALSHA of its delete script;
//	                        Extend: EVALSHA (GET, PEXPIRE); Unlock: EVALSHA (GET, DEL)
//	raw floor               SET NX PX; EVALSHA (GET, PEXPIRE); EVALSHA (GET, DEL): no fencing token
//
// PostgreSQL and MySQL/MariaDB (each on the shared database/sql pool of
// 2×workers connections; pgx's stdlib driver, go-sql-driver with
// interpolated parameters, as lease's URL openers use):
//
//	lease          sqllease.New on the pool: one statement per operation
//	row floor      a table (name, owner, token, expires_at in epoch ms by the database's clock);
//	               acquire: INSERT ... ON CONFLICT DO UPDATE ... WHERE expired RETURNING token
//	               (MySQL: ON DUPLICATE KEY UPDATE with IF per column, the affected-row count says
//	               whether it took the row); renew and release: one UPDATE fenced by name, owner
//	               (unique per tenure) and, on PostgreSQL, token
//	session locks  pg_try_advisory_lock/pg_advisory_unlock, GET_LOCK(name, 0)/RELEASE_LOCK on a
//	               connection pinned per worker: for reference only, they are not leases (no
//	               expiry, no token, held as long as the connection lives)
//
// etcd (each on the shared clientv3 client):
//
//	lease                  etcdlease.New on the client
//	concurrency.Mutex      on a Session per worker (its lease granted once, kept alive on a stream);
//	                       Lock: Txn (put its key if absent, range the first creator); Unlock:
//	                       DeleteRange; TryLock of a held name: that Txn, then DeleteRange of its key
//	KeepAliveOnce          on a lease granted in advance: a new LeaseKeepAlive stream per call
//	open-stream keep-alive one LeaseKeepAliveRequest and reply on a stream opened in advance: the
//	                       least an etcd renewal can cost
//
// Handoff compares lease.Run WithWait (woken by the store when the Locker
// is a working driver.Watcher, polling otherwise: the report says which),
// the same with the Watch hidden (polling), WithFairWait where the
// backend keeps a queue, bsm/redislock's LinearBackoff(10ms) and
// ExponentialBackoff(16ms, 1s), redsync's default tries (32, 50–250ms
// apart) and etcd's Mutex.Lock (a watch on its predecessor). Each lease
// waiter has a Locker of its own, as waiters in separate processes would
// (the Lockers share the connection's client; on SQL each opens its own
// pool by URL); one more row puts every waiter on one Locker, whose
// waiters take turns before they ask the store.
//
// Nothing here asserts a time: the tests only check that each mode runs
// and reports, with no failed call and no violation of mutual exclusion.
package main
