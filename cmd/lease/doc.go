// Lease runs a command while holding a lease, so that it runs on one
// machine at a time: flock(1) across machines, with a fencing token.
//
//	lease run [flags] NAME -- COMMAND [ARGS...]
//	lease status [--json] NAME
//	lease list [--json] [PREFIX]
//	lease release --force NAME
//	lease check [flags] [URL]
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
// status, list and release give up on a store that does not answer within
// --timeout (30s), with one line saying so.
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
//	--min-hold D            hold the lease at least D, even if COMMAND ends sooner,
//	                        so machines whose cron fires a little late skip the job
//	--renew-every D         renewal period (ttl/3)
//	--grace D               after the lease is lost, time between SIGTERM and SIGKILL (10s)
//	--owner S               owner identity (default host:pid:random)
//	--conflict-exit-code N  exit code when NAME is busy (75), like flock -E
//
// When another owner holds NAME, lease prints one line saying who and for
// how long, and exits 75 without running COMMAND; with --wait it says so,
// waits, and gives up the same way when the wait runs out (SIGINT ends
// the wait at once, exit 130). If the lease is lost
// while COMMAND runs (a renewal finds it taken over or released, or the
// store cannot be reached before the lease's deadline), lease sends
// SIGTERM to COMMAND's process group, SIGKILL to what is left of it after
// --grace, and exits 70 saying so: unlike etcdctl lock and consul lock,
// it does not let the command go on without the lease.
//
// COMMAND runs in a process group of its own, so that stopping it reaches
// everything it started; it therefore cannot read from the terminal.
// SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to lease are passed on to the
// group; lease waits for COMMAND to exit, then releases the lease. No
// lease is left behind by a clean exit.
//
// # status, list and release
//
// lease status NAME prints the holder, token and time left, and exits 0,
// or 3 when NAME is not held. lease list prints the held leases whose names
// start with PREFIX as a table; --json prints JSON for scripts (name,
// held, owner, token, expires, remaining_ms) from both. lease release
// --force NAME ends the current tenure of NAME whoever holds it, for
// clearing a stuck lease; its holder finds out at its next renewal. list
// and release need a backend that implements lease.Lister and
// lease.ForceReleaser (all of this module's do).
//
// # lease check
//
// lease check URL runs the conformance suite, every promise of the lease
// contract, against a live store and prints one line per promise, so that
// a store can be certified before it is trusted: a new PostgreSQL-
// compatible database, a Redis-compatible server, a managed etcd. It
// writes leases under a random prefix (--prefix) and takes a few multiples
// of --ttl (1s; 2s for etcd) plus the concurrency checks: a few seconds to
// a minute. It exits 0 when the store keeps every promise and 1 when it
// does not.
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
//	0      success (run: COMMAND exited 0)
//	1..    run: COMMAND's own exit code, 128+N if signal N killed it
//	1      an error: the store failed or could not be reached; check: the store failed
//	2      usage: bad flags or arguments, a malformed or unknown backend URL
//	3      status, release: nobody holds NAME
//	70     run: the lease was lost while COMMAND ran; COMMAND was stopped
//	75     run: NAME is held by another owner (--conflict-exit-code)
//	126    run: COMMAND could not be started
//	127    run: COMMAND was not found
//
// Every error is one line on stderr starting with "lease: ".
package main
