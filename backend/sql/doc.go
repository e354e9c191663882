// Package sqllease keeps leases in one SQL table, on SQLite, PostgreSQL or
// MySQL/MariaDB, with the database's clock as the only judge of expiry.
//
// The package lives in directory backend/sql but is named sqllease, so
// that programs importing it can still call database/sql "sql":
//
//	import sqllease "github.com/leasekit/lease/backend/sql"
//
// # Construction
//
// New makes a Locker on a *sql.DB the caller owns (Close leaves it open);
// Open opens and owns a pool from a URL. The drivers are
// modernc.org/sqlite ("sqlite", pure Go), github.com/jackc/pgx/v5/stdlib
// ("pgx") and github.com/go-sql-driver/mysql; New detects the dialect from
// the driver, or takes WithDialect. CockroachDB should work through the
// PostgreSQL dialect but is untested. A program with a *pgxpool.Pool
// passes stdlib.OpenDBFromPool(pool) (github.com/jackc/pgx/v5/stdlib),
// which shares the pool's connections.
//
// # Table
//
// One row per name (see Schema for the DDL): the SHA-256 of the name as
// the primary key, the full name as bytes (so 1024-byte names and names
// with NUL fit every dialect), owner, token, and acquired_at and
// expires_at in epoch milliseconds by the database's clock. The first
// operation asks the catalog (sqlite_master, to_regclass,
// information_schema) whether the table exists, never a probe query that
// would fail and abort a PostgreSQL transaction, and creates it with
// CREATE TABLE IF NOT EXISTS unless WithoutAutoCreate is given.
//
// # One statement per operation
//
// Acquire, Renew, Release and Inspect are one SQL statement each, and
// every "now" in them is the database's clock read inside the statement,
// so application servers need no synchronised clocks. Acquire is a
// conditional upsert (the takeover statement, statements_*.go) that
// always rewrites the row, choosing column by column between a new tenure
// and the current one, and returns the row it left: the caller won when
// the returned owner is its own, and otherwise the same answer names the
// holder and its remaining time for the *lease.HeldError. The price: an
// Acquire of a held name still writes the row, unchanged (on PostgreSQL a
// new row version and a commit; MySQL skips unchanged rows).
//
// MySQL 8 has no INSERT ... RETURNING: there Acquire is the same upsert
// followed by a read of the row it locked, in one transaction (4 round
// trips with BEGIN and COMMIT). MariaDB 10.5+ answers in one statement.
// Renew on MySQL returns the new expiry through LAST_INSERT_ID(expr).
// ForceRelease on MySQL is a transaction of two statements.
//
// Statements that the database rolls back whole (deadlocks, serialization
// failures, a busy SQLite file) are sent again, up to 10 times; two
// racing inserts of a new name never fail (ON CONFLICT / ON DUPLICATE
// KEY). Open on MySQL sets interpolateParams=true; with a pool of your own,
// set it too, or go-sql-driver prepares every statement on the server
// first (3 round trips instead of 1).
//
// # Tokens
//
// A name's first token is the database's time in milliseconds times 1000;
// each later tenure's is max(previous+1, now*1000). Release keeps the row
// (marking the tenure ended), so tokens grow across release and expiry,
// and the time floor keeps them growing after Cleanup deletes old rows.
// Re-entrant Acquire and Renew keep the token.
//
// # SQLite
//
// Open uses WAL and busy_timeout (5000ms unless busy_timeout= says
// otherwise), so several pools and several processes can share one file;
// a pool of your own should do the same
// (file:x.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)).
// SQLite 3.42 or later is needed for unixepoch('subsec').
//
// # URLs
//
// Importing the package registers these schemes with lease.Open:
//
//	sqlite:///absolute/path/lease.db   (or sqlite:relative/path.db)
//	postgres://user:pass@host:5432/db  (postgresql:// too)
//	mysql://user:pass@host:3306/db
//
// An in-memory SQLite database (:memory:) is refused: each pool connection
// would see a different one. Query parameters, for every scheme:
//
//	table=name        the table (default "leases"), [schema.]identifier
//	autocreate=false  do not create the table (default true)
//
// for sqlite:
//
//	busy_timeout=ms   how long a statement waits for a locked file (5000)
//
// for postgres (passed to the driver): sslmode, sslrootcert, sslcert,
// sslkey, connect_timeout, application_name; for mysql: tls (true, false,
// skip-verify, preferred) and timeout (dial timeout, a Go duration). Any
// other parameter is an error.
//
// # Cleanup
//
// Each name ever acquired keeps a row. Programs with many short-lived
// names call Cleanup now and then to delete rows whose last tenure ended
// long ago.
package sqllease
