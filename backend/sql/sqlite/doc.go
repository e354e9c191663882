// Package sqlitelease opens lease Lockers on SQLite files from URLs, with
// modernc.org/sqlite (pure Go, no cgo). Importing it registers the
// sqlite: scheme with lease.Open:
//
//	import _ "github.com/leasekit/lease/backend/sql/sqlite"
//
//	l, err := lease.Open(ctx, "sqlite:///var/lib/app/lease.db")
//
// or, for a *sqllease.Locker with its Cleanup and options:
//
//	import sqlitelease "github.com/leasekit/lease/backend/sql/sqlite"
//
//	l, err := sqlitelease.Open(ctx, "sqlite:///var/lib/app/lease.db")
//
// The package is named sqlitelease, like every backend package here (the
// directory's name and "lease"), so that it does not clash with
// modernc.org/sqlite's package sqlite. It links modernc.org/sqlite and
// nothing of PostgreSQL or MySQL.
//
// Open makes its pool with sql.OpenDB and modernc's connector, so it uses
// no database/sql driver name. Importing modernc.org/sqlite, however,
// registers the name "sqlite" with database/sql in that package's init,
// whoever imports it: a program that imports this package cannot also
// register a driver of its own under "sqlite" (sql.Register would panic).
//
// # SQLite is for one machine
//
// Expiry on SQLite is judged by unixepoch() read inside each statement,
// which is the wall clock of the machine the statement runs on: the
// client's, since SQLite runs in the client's process. Processes on one
// machine share that clock, so they agree on when a tenure ends. Processes
// on different machines sharing one file (over NFS, say) would each judge
// by their own clock, and a skewed clock would take over a tenure early;
// SQLite's locking over network file systems is unreliable as well. Use
// PostgreSQL, MySQL, Redis or etcd across machines. A clock stepped back
// on the one machine makes tenures last longer; stepped forward, end
// early.
//
// # URL
//
//	sqlite:///absolute/path/lease.db
//	sqlite:relative/path/lease.db
//
// An in-memory database (:memory:) and file: URIs are refused: each pool
// connection would see a different database. Query parameters: table
// ([schema.]name, default "leases"; not in the temp schema, which each
// connection has its own copy of), autocreate (false to leave creating
// the table to you), max_conns and max_idle_conns (the pool's bound,
// default 32, and its idle connections, default 16; see
// sqllease.WithPoolSize) and busy_timeout (how long, in milliseconds, a
// statement waits for a locked file; default 5000). Any other parameter is
// an error.
//
// The file is opened in WAL mode with synchronous=NORMAL, so that several
// pools and processes share it; a pool of your own for sqllease.New
// should do the same
// (file:x.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)).
package sqlitelease
