// Package sqllease keeps leases in one SQL table, on SQLite, PostgreSQL or
// MySQL/MariaDB, with the database's clock as the only judge of expiry.
//
// The package lives in directory backend/sql but is named sqllease, so
// that programs importing it can still call database/sql "sql":
//
//	import sqllease "github.com/leasekit/lease/backend/sql"
//
// # Construction, and drivers only for the store you use
//
// New makes a Locker on a *sql.DB the caller owns (Close leaves it open),
// from any database/sql driver: this package imports none. It detects the
// dialect from the package of db's driver (modernc.org/sqlite,
// mattn/go-sqlite3, pgx, lib/pq, go-sql-driver/mysql) or takes
// WithDialect. OpenConnector does the same on a database/sql/driver
// Connector and owns the pool it opens. A program with a *pgxpool.Pool
// passes stdlib.OpenDBFromPool(pool) (github.com/jackc/pgx/v5/stdlib) to
// New, which shares the pool's connections. CockroachDB should work
// through the PostgreSQL dialect but is untested.
//
// URLs are opened by one small package per dialect, which links that
// dialect's driver and no other, and registers its schemes with
// lease.Open when imported:
//
//	backend/sql/postgres  postgreslease  postgres://, postgresql://  (pgx)
//	backend/sql/mysql     mysqllease     mysql://                    (go-sql-driver)
//	backend/sql/sqlite    sqlitelease    sqlite:                     (modernc.org/sqlite)
//
// Each has Open(ctx, url, opts...) returning a *Locker of this package;
// backend/all imports all three.
//
// # Pools
//
// A pool that OpenConnector (and so each Open, and lease.Open) builds
// holds at most DefaultMaxOpenConns connections (32) and keeps up to
// DefaultMaxIdleConns (16) idle ones, each for up to a minute; calls
// beyond the bound wait for a connection within their context. Change
// both with WithPoolSize(open, idle), or in a URL with max_conns and
// max_idle_conns (every SQL scheme takes them; max_idle_conns defaults to
// 16 or max_conns if fewer; bad values are errors naming the parameter
// and matching lease.ErrInvalid). A *sql.DB given to New is the caller's
// and left as configured (database/sql's default: unbounded, 2 idle); New
// refuses WithPoolSize.
//
// On a bounded pool, Acquires and Releases leave an eighth of the
// connections (at least two) to everything else: with 32 connections, at
// most 28 of them run at once and the rest wait their turn within their
// context, so a burst of thousands of Acquires, or of Releases when as
// many Runs end together, cannot keep a renewal from a connection
// past its lease's Deadline (database/sql hands a freed connection to a
// random waiter). The bound is read from the pool when the Locker is made.
//
// On PostgreSQL and MariaDB 10.5+, Acquires share statements, but never
// wait for company: an Acquire waits only while every Acquire's turn is
// taken, and the one that gets a turn takes every Acquire then waiting
// (internal/combine states the invariant), of a distinct name, up to
// 256, and sends them in one takeover statement
// (acquireBatch in statements_postgres.go and statements_mysql.go), which
// does for each name what the single statement does and answers each
// Acquire as its own would (TestBatchedAcquiresGiveSingleAnswers); names
// go in key order, so concurrent batches lock rows in one order. A lone
// Acquire, or one that finds a turn free and nobody waiting, is its own
// statement (the queue is internal/combine's, as for Renews below). Ten
// thousand Acquires at once cost a few hundred statements and commits
// instead of ten thousand. A waiting Locker's AcquireOrWait (the
// takeover with its mark's change, sent by its first waiter of a name)
// never shares one: it waits for a turn of its own, since the shared
// statement knows no marks and could not remove the mark of one that
// acquires (TestAcquireOrWaitIsNotBatched). SQLite, whose writes go one at a time anyway,
// and MySQL 8, which has no INSERT ... RETURNING, send one statement per
// Acquire.
//
// On PostgreSQL, Renews and Releases share statements too: while as many
// Renews are under way as the pool has connections (or Releases as there
// are Acquires' turns), later ones wait, and the one that gets a turn
// renews every waiting tenure in one batch renewal statement
// (RenewBatch's), or ends every waiting tenure in one batch release
// statement (releaseBatch), each exactly as its own statement would
// (TestRenewsShareStatements, TestReleasesShareStatements). One commit,
// and one WAL flush, then serves several calls. A call that finds a turn
// free is its own statement at once, or shares one with the calls that
// arrived together with it. MariaDB's batch
// statement costs more than the Renews it would replace, so there, as on
// SQLite, each Renew and Release is its own statement.
//
// On MySQL and MariaDB, a Locker remembers the names it found held by
// another owner (up to 4096), and until the holder's time is up, by the
// remaining time the database gave, an Acquire of such a name by anyone
// but the holder reads the row first: a plain SELECT, which takes no
// lock and opens no read-write transaction, where the takeover upsert
// would lock the row and change nothing. A read that finds the name
// still held is the answer, the row the upsert would have returned; one
// that finds it free, ended or the caller's own is followed by the
// takeover, so an Acquire of a name released early elsewhere costs two
// round trips once (TestBusyAcquireReadsFirstMySQL). A Release by the
// Locker forgets the name. An Acquire that waits for a turn and goes out
// in a shared takeover statement (above) does not read first. PostgreSQL's takeover already leaves a held
// row untouched (TestBusyAcquireWritesNothingPostgres).
//
// # Waiting
//
// PostgreSQL watches and keeps the line; SQLite and MySQL poll. A
// PostgreSQL Locker with a Listener (WithListener; each Open gives one)
// is a driver.Watcher woken by the database (LISTEN/NOTIFY): it keeps one
// listening connection outside its pool, LISTENs on its table's channel,
// and holds a shared advisory lock per watched name, the name's watch
// lock, which the release and force-release statements of every Locker
// try, sending NOTIFY only when the try fails (NOTIFY serializes commits,
// so releases nobody waits for skip it). listen.go has the details.
// SQLite and MySQL Lockers, and PostgreSQL Lockers without a Listener,
// cannot watch: lease.Can[driver.Watcher] is false for them, their Watch
// reports errors.ErrUnsupported, they keep no line, lease.Run polls them,
// and lease.Run with WithFairWait fails at once with an error matching
// errors.ErrUnsupported, acquiring nothing.
//
// A PostgreSQL Locker with a Listener also keeps one line of waiters per
// name (turns.go): a release wakes one waiting Locker at a time instead of
// every one, and with lease.Run's WithFairWait the line is also the order
// in which waiters get the name. The line is the name's marks, rows of a
// second table, the lease table's name with _marks (see Schema), each a
// waiting Locker's place in line: placed, renewed or removed by the
// Locker's AcquireOrWait (driver.TurnWatcher), in the same statement as
// its takeover, ordered by the database's clock. The Locker's own waiters
// of a name share its one mark and turn watch, and only the first of them
// sends AcquireOrWait (see driver.Locker), never batched with other
// Acquires (see Pools). When somebody watches the name, the NOTIFY of a
// release or force-release names the waiter whose unlapsed mark came
// first, and only that Locker's turn watches wake, with every plain
// Watch; when there is no mark, every watch wakes. A fair AcquireOrWait
// (driver.Mark.Fair) of a free name takes it only when its mark is first
// or no mark is live; otherwise it acquires nothing and answers with the
// first mark's time left. Round trips on the pool:
//
//	Acquire, AcquireOrWait       1 (the mark, and fairness, are in the statement)
//	Release, ForceRelease        1 (NOTIFY only when somebody watches)
//	StopWaiting                  1, only when a Locker stops waiting with a mark left
//	Watch, WatchTurn             none on the pool; on the listening connection one
//	                             advisory lock (its watch lock) when none is held there yet
//	Stop of a Watch              none
//
// The line's invariant: a name's line is its marks that have not lapsed
// by the database's clock, ordered by when each was placed (placed_us,
// then waiter ID), with at most one mark per waiter; a mark lasts
// driver.Mark.Life from the AcquireOrWait that last placed or renewed it,
// keeps its place while it lives, and once lapsed is out of the line (a
// later AcquireOrWait places it anew at the back) until it is deleted; an
// AcquireOrWait that acquires removes the caller's mark (or, with Keep,
// places it anew at the back); and every decision about the line (whom
// a release, a force-release or a StopWaiting wakes, whether a fair
// AcquireOrWait may take a free name) is made by one statement from the
// marks it sees, by the first live mark, so no two Lockers act on
// different lines.
//
// A watch's Stop sends nothing: the last watch of a name leaves its
// watch lock in place for about 30 seconds, where a new watch of the name
// finds it, and the listening goroutine gives lingering locks back in
// batches (at most 1024 linger; the oldest go first). Until then a release
// of the name sends a NOTIFY that wakes nobody.
//
// The marks table is created with the lease table, and beside an existing
// lease table when auto-create is on; Cleanup deletes lapsed marks. A
// Locker that finds no marks table (auto-create off, or a role that may
// not create it) works as before, without a line: once it has found
// that out (at its first operation), its Can says it keeps no line, its
// store's WatchTurn reports errors.ErrUnsupported, lease.Run polls its
// waiters and refuses WithFairWait, its AcquireOrWait is Acquire (no
// line, so nothing fair), and its releases wake every watch. While Lockers of an earlier version of this package share the
// table, their releases wake every waiter (their NOTIFY names nobody),
// and their own watches miss the releases that name a waiter, trying
// again at lease.Run's fallback instead.
//
// # Table
//
// One row per name (see Schema for the DDL): the SHA-256 of the name as
// the primary key, the full name as bytes (so 1024-byte names and names
// with NUL fit every dialect), owner, token, and acquired_at and
// expires_at in epoch milliseconds by the database's clock. The first
// operation asks the catalog (sqlite_master, pg_class through
// to_regclass, information_schema) where the table is, never a probe
// query that would fail and abort a PostgreSQL transaction, and creates it
// with CREATE TABLE IF NOT EXISTS unless WithoutAutoCreate is given. From
// then on the statements name the table with the schema (database, on
// MySQL) the catalog found it in.
//
// Lease.Acquired is acquired_at, by the database's clock, returned by the
// same single statement as the rest of the row (Acquire, Renew, Inspect,
// List, ForceRelease). On MySQL and MariaDB, Renew's statement can hand
// back only the new expiry, so a renewed Lease keeps the Acquired of the
// Lease given to Renew (acquired_at never changes within a tenure).
//
// # Temporary tables
//
// A temporary table belongs to one connection: two Lockers on one URL,
// or two connections of one pool, would each see their own and both grant
// the same name. So a temporary table is refused with an error matching
// lease.ErrInvalid: a table named in SQLite's temp schema or PostgreSQL's
// pg_temp or pg_temp_N schemas by New (and Schema), and a name that the
// catalog lookup resolves to a temporary table (PostgreSQL's
// relpersistence 't', SQLite's sqlite_temp_master for an unqualified
// name) by the first operation. Other connections' temporary tables
// cannot shadow the table afterwards on SQLite and PostgreSQL, since the
// statements name its schema (main., or the one the catalog gave).
//
// MySQL and MariaDB before 11.2 do not list temporary tables in
// information_schema (MariaDB 11.2 and later do, and they are refused),
// and a temporary table shadows even a table named with its database. A
// "CREATE TEMPORARY TABLE leases" on a connection of a pool given to New
// would therefore send that connection's lease statements to it, and
// mutual exclusion would break without any error. Never create a
// temporary table with the lease table's name on such a pool. The pools
// that Open and OpenConnector make run nothing but the Locker's
// statements.
//
// # One statement per operation
//
// Acquire, Renew, Release and Inspect are one SQL statement each, and
// every "now" in them is the database's clock read inside the statement,
// so application servers need no synchronised clocks. Acquire is a
// conditional upsert (the takeover statement: acquire in
// statements_postgres.go, statements_mysql.go and statements_sqlite.go)
// that chooses column by column between a new tenure and the current one
// and returns the row it left: the caller won when the returned owner is
// its own, and otherwise the same answer names the holder and its
// remaining time for the *lease.HeldError.
//
// On PostgreSQL an Acquire of a name another owner holds writes nothing
// (no row version, row lock or transaction ID): the statement reads
// the row in its snapshot and inserts only when that row is free or the
// caller's, with ON CONFLICT DO UPDATE ... WHERE the latest version is
// still free or the caller's. When a commit lands between the snapshot
// and the conflict check and leaves the name held, the statement returns
// no row, having written nothing, and Acquire sends it once more (two
// statements, only in that race). On SQLite and MySQL/MariaDB the upsert
// rewrites a held row unchanged (MySQL skips unchanged rows).
//
// MySQL 8 has no INSERT ... RETURNING: there Acquire is the same upsert
// followed by a read of the row it locked, in one transaction (4 round
// trips with BEGIN and COMMIT). MariaDB 10.5+ answers in one statement.
// The upsert refers to the row it would insert as VALUES(col), which
// MySQL 8.0.20 deprecates: from 8.0.19, by VERSION(), it is written with
// a row alias instead (INSERT ... VALUES (...) AS new ON DUPLICATE KEY
// UPDATE, reading new.col and table.col), while MariaDB, which has no
// row alias, and older or unrecognised versions keep VALUES().
// Renew on MySQL returns the new expiry through LAST_INSERT_ID(expr).
// ForceRelease on MySQL is a transaction of two statements.
//
// Statements that the database rolls back whole (deadlocks, serialization
// failures, a busy SQLite file) are sent again, up to 10 times; two
// racing inserts of a new name never fail (ON CONFLICT / ON DUPLICATE
// KEY). See New for how errors are recognised without importing drivers.
// On MySQL, open the pool with interpolateParams=true, as
// backend/sql/mysql does, or go-sql-driver prepares every statement on
// the server first (3 round trips instead of 1).
//
// # Batch renewal
//
// Locker.RenewBatch (driver.Locker's, which lease.Run's renewer uses)
// renews up to 1000 distinct tenures with one statement, whatever their
// ttls: the batch goes as one JSON parameter (so no driver needs array
// support and no parameter limit applies), and an UPDATE joined to it
// (json_each on SQLite, json_array_elements on PostgreSQL, JSON_TABLE on
// MySQL and MariaDB) renews every tenure that is intact at the
// statement's one now and returns the rows it renewed; the rest are
// lost, their rows untouched. MySQL has no UPDATE ... RETURNING, so there
// the UPDATE hands back its now through LAST_INSERT_ID and runs in a
// transaction, followed by a read of the chunk's rows only when it did
// not renew them all (BEGIN, UPDATE, COMMIT: 3 round trips per 1000, 4
// when some were lost); servers without JSON_TABLE (MySQL before 8.0.4,
// MariaDB before 10.6, told by VERSION()) renew one tenure at a time,
// 8 at once. Each result is what Renew would return at the statement's
// now, Acquired included (on MySQL, the caller's, as Renew keeps it).
// Requests for the same tenure (name, owner, token) in one batch are
// renewed once, for the last one's ttl, each answered as a sequence of
// Renews would be. Tenures go in order of key, so that concurrent batches
// lock shared rows in one order. A statement that fails fails the call
// when it is the first; after earlier ones succeeded it fails only its
// own and the later requests, and the earlier renewals are reported.
// 10,000 renewals cost 10 statements instead of 10,000: on this project's
// 2-CPU test machine about 0.1 to 0.3s instead of 0.8 to 1.5s (see
// TestRenewBatchScale).
//
// # Timeouts and lost replies
//
// Every operation, and OpenConnector, returns by the time its context
// ends, with an error matching the context's, also when the server
// accepts connections and never answers, and also while another call is
// still creating the table.
//
// A Release (or any statement) whose reply is lost returns the driver's
// error, never lease.ErrLost, though the database may have released the
// tenure: nothing sends it again. database/sql resends a statement only
// when the driver returns driver.ErrBadConn, which pgx's stdlib does only
// for failures before anything was written (pgconn.SafeToRetry) and
// go-sql-driver only when its first write wrote no byte; a connection
// broken after the statement went out surfaces as the driver's error
// (pgconn's, mysql.ErrInvalidConn) or the context's. This package resends
// only after the errors listed above, which mean the database rolled the
// statement back.
//
// # Tokens
//
// A name's first token is the database's time in milliseconds times 1000;
// each later tenure's is max(previous+1, now*1000). Release keeps the row
// (marking the tenure ended), so tokens grow across release and expiry,
// and the time floor keeps them growing after Cleanup deletes old rows.
// Re-entrant Acquire and Renew keep the token.
//
// # Relaxed durability, and what a crash can forget
//
// Every operation is one transaction that the database makes durable
// before it answers, and on PostgreSQL the flush of the write-ahead log is
// most of an Acquire's or Release's time. A PostgreSQL URL may trade that
// away with synchronous_commit=off (see backend/sql/postgres: any run-time
// setting in the URL is sent at connect): the server answers before the
// flush, and writes the log within three times wal_writer_delay (600ms by
// default). A crash of the database server (not of a client, and not a
// clean restart) can then forget what it acknowledged in that window:
//
//   - a forgotten Acquire or Renew leaves the row as it was before: the
//     name can be taken by another owner before the Deadline its holder
//     was given, so two holders can overlap until the old holder's next
//     Renew, which finds its tenure gone (lease.ErrLost; lease.Run then
//     cancels the work);
//   - a forgotten Release leaves the tenure to expire at its ttl.
//
// Tokens still never go back: a token is at least the database's time in
// milliseconds times 1000 when it was issued, and a server that crashed
// and came back is past the forgotten tokens' milliseconds (unless its
// clock stepped back), so a new tenure's token is larger than any the
// crash forgot, and a fence checker (package fence) still refuses the overlapping
// old holder once the new one has written. Use the relaxed mode only where
// a crash of the database may cost that overlap; with the default,
// nothing acknowledged is forgotten. MySQL and MariaDB have no session
// setting that does this: innodb_flush_log_at_trx_commit=2 (or 0) is
// global, set by the operator, and has the same consequences, with up to
// a second of acknowledged writes in the window.
//
// # SQLite: the store's clock is each client's clock
//
// SQLite runs inside each client process, so its unixepoch(), which
// judges expiry, is the wall clock of the machine each process runs on.
// On one machine every process reads the same clock and they agree; a
// wall clock stepped forward (an NTP step) ends tenures early, and back,
// late. Processes on different machines sharing one file would each judge
// expiry by their own clock, and a fast clock would take over a tenure
// its holder still has: SQLite is for processes on one machine (its
// locking over network file systems is unreliable too). Use PostgreSQL,
// MySQL, Redis or etcd across machines.
//
// Pools opened by backend/sql/sqlite use WAL and busy_timeout, so several
// pools and several processes can share one file; a pool of your own
// should do the same
// (file:x.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)).
// SQLite 3.42 or later is needed for unixepoch('subsec').
//
// # Cleanup
//
// Each name ever acquired keeps a row. Programs with many short-lived
// names call Cleanup now and then to delete rows whose last tenure ended
// long ago. On PostgreSQL, Cleanup also deletes every lapsed mark (the
// marks of waiters that died without taking theirs away; a waiter's next
// AcquireOrWait of a name deletes the lapsed marks of that name too).
package sqllease
