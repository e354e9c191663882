// Lease runs a command while holding a lease, so that it runs on one
// machine at a time: flock(1) across machines, with a fencing token.
//
//	lease run [flags] NAME -- COMMAND [ARGS...]
//	lease run --slots N [flags] NAME -- COMMAND [ARGS...]
//	lease leader [flags] NAME -- COMMAND [ARGS...]
//	lease observe [--json] [--once] [--interval D] NAME
//	lease status [--json] [--slots N] NAME
//	lease list [--json] [--watch [--interval D] [--count N]] [PREFIX]
//	lease top [--json] [--interval D] [--count N] [PREFIX]
//	lease release --force NAME
//	lease check [flags] [URL]
//	lease schema [URL]
//	lease cleanup [--older-than D] [URL]
//	lease version
//	lease help [COMMAND]
//
// Install it with
//
//	go install github.com/leasekit/lease/cmd/lease@latest
//
// # The store
//
// Every command works on the store named by --backend URL (before or after
// the command's name), else by $LEASE_BACKEND, else on a SQLite file in
// the user's cache directory ($XDG_CACHE_HOME/lease/lease.db or
// ~/.cache/lease/lease.db on Linux), which serves the processes of one
// user on one machine with nothing installed. To coordinate machines,
// point them all at one PostgreSQL, MySQL, Redis or etcd URL:
//
//	export LEASE_BACKEND='postgres://app@db.internal:5432/app?sslmode=require'
//
// No command waits on the store without a limit: status, list, release,
// cleanup and the opening of the store by check give up after --timeout
// (30s); lease run gives opening the store --timeout if given, else its
// --ttl, and each acquire until the deadline the lease would have (just
// under --ttl). A store that does not answer in time (one that accepts
// connections but never answers included) is one line naming the store,
// without its password, and exit 1.
//
// # Flags and the environment
//
// Flags are GNU-style (--ttl 30s or --ttl=30s; Go's -ttl 30s works too)
// and may come before or after the command's arguments, except for lease
// run, whose flags come before NAME. A duration is a Go duration (30s,
// 1m30s, 500ms) or a number of seconds (--ttl 30 is --ttl 30s, as with
// etcdctl).
//
// Every flag may also come from the environment, as LEASE_ followed by
// the flag's name in capitals with dashes as underscores: --ttl is
// $LEASE_TTL, --renew-every $LEASE_RENEW_EVERY, --backend $LEASE_BACKEND,
// --timeout $LEASE_TIMEOUT, --json $LEASE_JSON (true or false). A flag on
// the command line wins; a bad value in the environment is an error that
// names the variable, but only for a command that has that flag. The
// exceptions: --owner (lease run gives COMMAND its own owner as
// $LEASE_OWNER, and a lease run inside COMMAND must not take it as its own
// and re-enter the outer tenure), --force (a deliberate act, not a
// setting), and lease check's own flags (its --ttl and --timeout mean
// something else; it reads only $LEASE_BACKEND, and $LEASE_TIMEOUT for
// opening the store).
//
// # lease run
//
// lease run acquires NAME, runs COMMAND, renews the lease every --ttl/3 as
// COMMAND runs, and releases it when COMMAND exits; lease then exits with
// COMMAND's exit code (128+N when a signal N killed it). COMMAND gets
// LEASE_NAME, LEASE_OWNER and LEASE_TOKEN in its environment: pass
// LEASE_TOKEN to what it writes to, so that a write from a holder that
// lost the lease can be refused (the token of every new tenure is
// larger).
//
//	lease run --ttl 1m --min-hold 1m nightly-report -- /usr/local/bin/send-report
//
// Flags:
//
//	--ttl D                 lease length; a crashed holder blocks NAME this long (30s)
//	--wait D                wait up to D for a busy lease (0: give up at once)
//	--min-hold D            hold the lease at least D after acquiring it, even if
//	                        COMMAND ends sooner, so machines whose cron fires a
//	                        little late skip the job; lease itself keeps running,
//	                        and renewing, until then
//	--renew-every D         renewal period (ttl/3)
//	--grace D               time between SIGTERM and SIGKILL, out of the lease (below)
//	                        (10s, or ttl/3 if less)
//	--owner S               owner identity (default host:pid:random)
//	--slots N               NAME is a semaphore of N slots: at most N at once (below)
//	--conflict-exit-code N  exit code when NAME is busy (75), like flock -E
//	--timeout D             limit for opening the store (default: the ttl)
//	-v, --verbose           log what happens to the lease on stderr (below)
//
// When another owner holds NAME, lease prints one line saying who and for
// how long, and exits 75 without running COMMAND; with --wait it says so,
// waits, and gives up the same way when the wait runs out (SIGINT ends
// the wait at once, exit 130). A store that grants the lease only after
// its deadline has passed (it answered too late) is one line and exit 1:
// COMMAND is not started, and the lease is released.
//
// The lease's deadline is when this machine stops counting on the lease:
// the moment lease asked for it or last renewed it, plus --ttl, minus a
// margin for clock drift (1% of the ttl plus 2ms), so that it comes before
// the store can give the lease to anyone else. The grace comes out of the
// lease, so that COMMAND is gone by the deadline:
//
//   - If no renewal has succeeded by the deadline minus --grace (the store
//     is down, slow or unreachable), COMMAND's process group gets SIGTERM
//     then, and SIGKILL 100ms before the deadline (half the grace if that
//     is shorter). With --grace 0, SIGTERM and SIGKILL come together at
//     the deadline.
//   - If a renewal finds the lease lost (taken over, or released with
//     lease release --force), the group gets SIGTERM at once, and SIGKILL
//     --grace later or 100ms before the deadline, whichever comes first.
//
// Either way lease exits 70 saying so: unlike etcdctl lock and consul
// lock, it does not let the command go on without the lease. A --grace
// that does not fit in the lease is refused: the deadline minus the grace
// must come after the first renewal is due, that is --grace must be
// shorter than --ttl minus --renew-every minus the drift margin (with the
// defaults, 19.7s for a 30s ttl). Give a command that needs a long grace a
// long ttl.
//
// COMMAND runs in a process group of its own, so that stopping it reaches
// everything it started. When lease is in the foreground of the terminal
// that is its stdin, COMMAND's group gets the foreground instead (on
// Linux; elsewhere a COMMAND that reads the terminal is stopped by
// SIGTTIN), so an interactive COMMAND behaves as it would without lease:
// it reads the terminal, Ctrl-C and Ctrl-Z reach it, and when Ctrl-Z
// stops it, lease takes the terminal back and stops too, so the shell
// regains control; fg continues both, and COMMAND gets the terminal again.
// SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGCONT sent to lease are passed on
// to the group; lease waits for COMMAND to exit, then releases the lease.
// No lease is left behind by a clean exit.
//
// If lease itself dies, even by SIGKILL, COMMAND's whole process group is
// killed within moments, so that nothing runs on without the lease: the
// group is led by a small watcher (a copy of lease, started first) that
// kills the group when lease's end of a pipe closes, and on Linux COMMAND
// also has SIGKILL as its parent-death signal. Processes that COMMAND
// leaves running after it exits normally are not touched.
//
// With -v (--verbose), lease run logs the lease's life on stderr, one
// log/slog text line each (lease.Run's WithLogger): acquired (with how
// long it waited), busy, each renewal that succeeds (at DEBUG, with
// lease.slack: how long before the deadline it landed; a slack that
// shrinks towards --grace means the store is slow), renewal trouble,
// lost (at ERROR) and released (with how long it was held). Every line
// carries lease.name, lease.owner, lease.ttl and, once acquired,
// lease.token. COMMAND's own stderr is interleaved with them.
//
//	time=2026-12-03T08:52:54.516Z level=INFO msg="lease acquired" lease.name=x lease.owner=vm:5260:d215b11b06e1:1 lease.ttl=3s lease.token=1796287974515000 lease.waited=473.852µs
//	time=2026-12-03T08:52:55.525Z level=DEBUG msg="lease renewed" lease.name=x ... lease.slack=1.958119386s
//	time=2026-12-03T08:52:55.723Z level=INFO msg="lease released" lease.name=x ... lease.held=1.207713195s
//
// # lease run --slots: at most N at once
//
// With --slots N, NAME is a semaphore (package semaphore): COMMAND runs
// while holding one of NAME's N slots, so that at most N COMMANDs run at
// once across every machine on the store. Slot I is the ordinary lease
// lease.semaphore/NAME#I, renewed, lost and released as under plain
// lease run, with everything above (--wait, --grace, --min-hold, exit
// codes) applying to the slot. COMMAND also gets LEASE_SLOT, the slot's
// index from 0 to N-1; LEASE_NAME and LEASE_TOKEN are its slot's lease
// and fencing token, which increase per slot, not across slots, so fence
// what COMMAND writes under LEASE_NAME. When every slot is held, lease
// says so and exits 75; with --wait it waits, woken by the release of any
// slot where the store can notify. A caller with a smaller N than the
// holders' takes only slots below its own N, so lowering N takes effect
// as the holders above it finish, and there are never more holders than
// the largest N among them. Names beginning with lease.semaphore/ are
// reserved for slots: lease run refuses them without --slots.
//
//	lease run --slots 4 --wait 1h nightly-export -- ./export.sh
//
// lease status --slots N NAME shows the semaphore's holders slot by slot
// (those above N too, where the store can list), and exits 3 when no slot
// is held; with --json an object with name, slots, held and holders (each
// a lease as under status, with its slot). lease list
// lease.semaphore/NAME# lists them as leases.
//
//	$ lease status --slots 4 nightly-export
//	nightly-export: 2 of 4 slots held
//	  slot 0: held by web-1:4242:9f3c2a1b07d4:1, token 17, acquired 2026-12-05T09:02:11Z, held for 3m2s, 27s left (expires 2026-12-05T09:05:40Z)
//	  slot 3: held by web-2:977:0b1c33e8a4f2:1, token 4, acquired 2026-12-05T09:04:50Z, held for 23s, 29s left (expires 2026-12-05T09:05:42Z)
//
// # lease leader and lease observe
//
// lease leader is leader election (package election) for a command: it
// campaigns for the office NAME, stands by while another candidate leads,
// and once elected runs COMMAND for one term, then resigns and exits with
// COMMAND's code, for a supervisor (systemd, Kubernetes) to start it
// again. COMMAND gets LEASE_NAME, LEASE_OWNER and LEASE_TOKEN as under
// lease run, plus LEASE_TERM (the term number, equal to the fencing token)
// and LEASE_LEADER (--id). It shares lease run's child handling: its own
// process group, signals passed on, SIGTERM then SIGKILL before the
// lease's deadline when the lease cannot be kept (exit 70), and killed
// with lease if lease dies. SIGTERM or SIGINT while leading goes to
// COMMAND, and lease resigns only once COMMAND has exited, so the next
// leader's COMMAND never overlaps it; while standing by they exit 0
// without running COMMAND. --ttl (15s) is the leader's lease, --id and
// --meta what observers see (the ID defaults to hostname:pid; --meta is
// an address, say), and --timeout D gives up standing by after D with
// exit 75.
//
//	lease leader --ttl 10s --id "$(hostname)" --meta 10.0.0.5:8080 scheduler -- ./scheduler
//
// lease observe prints the office's leader (ID, term, metadata, owner) or
// "no leader", then one line per change, never a term older than one it
// printed, until SIGINT or SIGTERM (exit 0); --json makes each line a JSON
// object, and --once prints the current state and exits 0, or 3 when
// nobody leads. It is notified by stores that can (memory, Redis, etcd)
// and polls at least every --interval (1s) otherwise.
//
//	$ lease observe scheduler
//	scheduler: leader node-a, term 1796344321651000, metadata "10.0.0.5:8080", owner "node-a 3044c08e6539 10.0.0.5:8080"
//	scheduler: no leader
//
// # status, list, top and release
//
// lease status NAME prints the holder, token, when the tenure began and
// how long ago, and the time left, and exits 0, or 3 when NAME is not
// held. lease list prints the held leases whose names start with PREFIX
// as a table: NAME, OWNER, TOKEN, ACQUIRED (when the tenure began, by the
// store's clock, in this machine's time zone; a renewal does not change
// it, a new tenure does) and LEFT (Expires read against this machine's
// clock). ACQUIRED is "-" on a store that does not record it: etcd, and
// Redis tenures begun by a version of lease before it was recorded.
// --json prints JSON for scripts (name, held, owner, token, acquired,
// expires, remaining_ms; acquired is left out when unknown) from both.
//
// lease list --watch, or lease top, lists again every --interval (1s)
// until interrupted (SIGINT or SIGTERM: exit 0) or --count lists have
// been shown, each line ending with its time left as a bar, such as
// [#######   ]. Stores do not say what ttl a tenure was granted with, so a
// bar's full length is the longest time left the watch has seen for that
// tenure: the ttl once it has seen a renewal (or the tenure's start), and
// until then the time left when it first saw it. On a terminal each list
// replaces the last (the screen is cleared); otherwise, in a pipe or a
// file, the lists follow one another, each after a line with the time and
// how many leases are held, separated by blank lines. With --json it
// prints one JSON array per line per list. A list that fails is one line
// on stderr and the watch goes on; it exits 1 if the last one failed.
//
//	$ lease top jobs/
//	08:52:54  2 leases held whose names start with "jobs/"
//	NAME                 OWNER       TOKEN             ACQUIRED              LEFT
//	jobs/nightly-report  web-1:4121  1796287969466000  2026-12-03T08:52:49Z  25s   [######### ]
//	jobs/reindex         web-2:977   1796287969465000  2026-12-03T08:52:49Z  55s   [##########]
//
// lease release
// --force NAME ends the current tenure of NAME whoever holds it, for
// clearing a stuck lease; its holder finds out at its next renewal. list
// and release need a backend that implements lease.Lister and
// lease.ForceReleaser (all of this module's do).
//
// # schema and cleanup
//
// lease schema URL prints the CREATE TABLE statement of a SQL store
// (sqlite, postgres, mysql) for its ?table= (default "leases"), and for
// PostgreSQL also that of the table's waiter marks (<table>_marks), for your
// own migrations (then open the store with ?autocreate=false). It does not
// connect. For other stores, which keep no table, it exits 2.
//
// A SQL store keeps one row per name ever used, so that tokens keep
// growing. lease cleanup [--older-than D] URL deletes the rows of names
// whose last lease ended more than D ago (24h; at least 1m) and says how
// many; tokens stay in order across it. Redis, etcd and memory stores
// delete what expires on their own: for them it says there is nothing to
// clean up and exits 0, so one cron line serves any store.
//
// lease version prints the module version lease was built from, or
// "(devel)" when there is none (a build from a checkout with Go 1.24 or
// later shows a pseudo-version instead).
//
// # lease check
//
// lease check URL runs the conformance suite, every promise of the lease
// contract, against a live store, in the lease process itself, and prints
// one line per promise, so that a store can be certified before it is
// trusted: a new PostgreSQL-compatible database, a Redis-compatible
// server, a managed etcd. Each line says PASS, FAIL (the store broke the
// promise, with how), SKIP (it does not apply: an optional interface the
// store lacks, or fault cases the store cannot have, with why) or ERROR
// (the store failed, a refused connection or too many clients, so the
// promise could not be judged), then a summary. --json prints one JSON
// object instead: the verdict ("pass", "fail" or "untested"), the counts,
// and per case its name, contract line, outcome (pass, fail, skip,
// error), reason and duration (-v adds every log line).
//
// For a store reached over TCP (postgres, mysql, redis, etcd), the fault
// cases run too: the suite opens Lockers on the same URL with its host
// replaced by the address of a proxy it controls, which stalls, delays,
// loses replies and resets connections, and checks that every call still
// returns by its deadline as a store failure, never as held or lost.
// --no-faults leaves them out; for SQLite and mem:// they are skipped, as
// for a URL whose host is in its query or whose TLS certificate would not
// match the proxy.
//
// The suite writes leases under a random prefix (after --prefix, if
// given), and when it is done lease check force-releases (or, where the
// store cannot, releases) every lease still held under that prefix, so
// that nothing it took stays held in a production store; the rows or keys
// that keep the names' tokens stay, as for any name. Opening the store is
// bounded by the global --timeout (30s), the whole run by check's
// --timeout (10m). It takes a few multiples of --ttl (1s; 2s for etcd)
// plus the concurrency checks: a few seconds on a nearby server. It exits
// 0 when the store keeps every promise checked, 1 when it breaks one, 2 on
// a usage error and 4 when the store could not be tested (unreachable,
// failing during the run, or a run longer than --timeout). No output shows
// the URL's password.
//
// # URLs
//
//	mem://                                    in-process memory (for tests; useless across processes)
//	sqlite:///absolute/path.db                SQLite file (or sqlite:relative/path.db)
//	postgres://user:pass@host:5432/db         PostgreSQL (postgresql:// too)
//	mysql://user:pass@host:3306/db            MySQL 8 or MariaDB 10.5+
//	redis://user:pass@host:6379/0             Redis (rediss:// for TLS)
//	etcd://user:pass@host:2379,host:2379      etcd v3 cluster
//
// Query parameters; any other is an error:
//
//	scheme           parameter           meaning (default)
//	sqlite, postgres,
//	  mysql          table               table name, [schema.]identifier ("leases")
//	                 autocreate          create the table if missing (true)
//	sqlite           busy_timeout        ms a statement waits for a locked file (5000)
//	postgres         sslmode             libpq SSL mode: disable, require, verify-full...
//	                 sslrootcert         CA certificate file
//	                 sslcert, sslkey     client certificate and key files
//	                 connect_timeout     seconds to wait for a connection
//	                 application_name    shown in pg_stat_activity
//	mysql            tls                 true, false, skip-verify or preferred
//	                 timeout             dial timeout, a Go duration such as 5s
//	redis, rediss    prefix              key prefix, no { or } ("lease:")
//	                 protocol            RESP version, 2 or 3
//	                 client_name         CLIENT SETNAME of each connection
//	                 max_retries         retries of a failed command (-1: none)
//	                 dial_timeout        e.g. 5s
//	                 read_timeout        e.g. 3s (-1: none)
//	                 write_timeout       e.g. 3s (-1: none)
//	                 pool_size           most connections (10 per CPU)
//	                 pool_timeout        wait for a free connection
//	                 min_idle_conns      connections kept open
//	                 max_idle_conns      idle connections kept at most
//	                 conn_max_idle_time  close connections idle this long
//	                 conn_max_lifetime   close connections this old
//	                 skip_verify         rediss: do not verify the server certificate
//	etcd             prefix              key prefix, not empty ("lease/")
//	                 dial_timeout        how long to wait to connect (5s)
//	mem              (none)
//
// # Exit codes
//
//	0      success (run, leader: COMMAND exited 0; leader: a standby was told
//	       to stop)
//	1..    run, leader: COMMAND's own exit code, 128+N if signal N killed it
//	1      an error: the store failed, could not be reached or did not answer in
//	       time (run: or answered after the lease's deadline; COMMAND did not
//	       start); check: the store broke a promise of the contract
//	2      usage: bad flags or arguments (command line or environment), a
//	       malformed or unknown backend URL; schema: not a SQL store
//	3      status, release: nobody holds NAME; observe --once: no leader
//	4      check: the store could not be tested (unreachable or failing)
//	70     run, leader: the lease was lost while COMMAND ran; COMMAND was stopped
//	75     run: NAME is held by another owner (--conflict-exit-code); leader:
//	       still standing by after --timeout
//	126    run: COMMAND could not be started
//	127    run: COMMAND was not found
//
// Every error is one line on stderr starting with "lease: ".
//
// # Guide
//
// A tour of the command for operators: https://github.com/leasekit/lease/blob/main/docs/cli.md.
package main
