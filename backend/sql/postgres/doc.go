// Package postgreslease opens lease Lockers on PostgreSQL from URLs, with
// pgx (github.com/jackc/pgx/v5). Importing it registers the postgres://
// and postgresql:// schemes with lease.Open:
//
//	import _ "github.com/leasekit/lease/backend/sql/postgres"
//
//	l, err := lease.Open(ctx, "postgres://app@db.internal:5432/app?sslmode=require")
//
// or, for a *sqllease.Locker with its Cleanup and options:
//
//	import postgreslease "github.com/leasekit/lease/backend/sql/postgres"
//
//	l, err := postgreslease.Open(ctx, url, sqllease.WithTable("jobs.leases"))
//
// The package is named postgreslease, like every backend package here
// (sqllease, redislease, etcdlease: the directory's name and "lease"), so
// that it clashes with none of the driver packages a program imports
// (pgx, pgconn, stdlib). It links pgx and nothing of SQLite or MySQL.
//
// The Locker is backend/sql's: one row per name, one statement per
// operation, expiry judged by PostgreSQL's clock_timestamp(); see
// package sqllease. A program with a *sql.DB or a *pgxpool.Pool of its own
// needs no URL: sqllease.New(db), or
// sqllease.New(stdlib.OpenDBFromPool(pool)).
//
// # URL
//
//	postgres://user:password@host:5432/database?sslmode=require
//
// or, through a Unix socket, postgres:///database?host=/var/run/postgresql
// (the socket's directory).
//
// Query parameters of the Locker's: table ([schema.]name, default
// "leases"; not in pg_temp), autocreate (false to leave creating the
// table, and its marks table for waiters, to you: "lease schema" prints
// both), max_conns and max_idle_conns (see Connections; pgxpool's
// pool_max_conns is taken for max_conns, and its other pool_* settings are
// refused).
//
// Every other parameter goes to pgx.ParseConfig as in a libpq URL. libpq's
// keywords and pgx's own configure the connection: host, port, user,
// password, sslmode, sslrootcert, sslcert, sslkey, connect_timeout,
// target_session_attrs, default_query_exec_mode, statement_cache_capacity,
// ... Any other is a run-time setting that pgx sends the server at
// connect: search_path, statement_timeout, lock_timeout,
// application_name, TimeZone, ... The server refuses a setting it does
// not know, a bad value, or one that cannot be set at connect, and Open
// then fails with an error matching lease.ErrInvalid that names it. A
// search_path decides where an unqualified table is found and created:
// the Locker asks the catalog where it resolved, names it with that
// schema from then on, and refuses a temporary one (a search_path that
// puts pg_temp first would create the table there). The PG* environment
// variables and ~/.pgpass fill in what the URL leaves out, as with psql.
//
// # Connections
//
// The pool Open builds holds at most max_conns connections (default 32,
// sqllease.DefaultMaxOpenConns): a burst of calls beyond that waits for a
// connection, within each call's context, instead of opening a server
// backend per call. It keeps up to max_idle_conns of them open while idle
// (default 16, or max_conns if fewer), each for up to a minute. The
// option sqllease.WithPoolSize(open, idle), given to Open, does the same
// and wins over the URL. A *sql.DB of your own given to sqllease.New is
// left as you configured it.
//
// The pool Open builds pings a connection before reusing it only when it
// has been idle for over 30 seconds (pgx's default is 1 second, which
// would make every renewal of lease.Run, one every ttl/3, cost two round
// trips). A connection the server closed in the meantime (a restart, a
// killed backend) makes the one call that uses it fail with a store
// error, never a lease outcome; the pool then drops it.
//
// Open is bounded by its context: connecting, the catalog check and
// CREATE TABLE all end when ctx does, also on a server that accepts the
// connection and never answers. No error quotes the URL's password.
package postgreslease
