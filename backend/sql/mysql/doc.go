// Package mysqllease opens lease Lockers on MySQL and MariaDB from URLs,
// with go-sql-driver (github.com/go-sql-driver/mysql). Importing it
// registers the mysql:// scheme with lease.Open:
//
//	import _ "github.com/leasekit/lease/backend/sql/mysql"
//
//	l, err := lease.Open(ctx, "mysql://app:secret@db.internal:3306/app")
//
// or, for a *sqllease.Locker with its Cleanup and options:
//
//	import mysqllease "github.com/leasekit/lease/backend/sql/mysql"
//
//	l, err := mysqllease.Open(ctx, url, sqllease.WithTable("leases"))
//
// The package is named mysqllease, like every backend package here (the
// directory's name and "lease"), so that it does not clash with
// go-sql-driver's package mysql, which a program may import beside it. It
// links go-sql-driver and nothing of SQLite or PostgreSQL.
//
// Importing the package also teaches package sqllease go-sql-driver's
// deadlock errors (1213, and 1020 "record has changed"), so that a
// statement the server rolled back is sent again: its errors carry their
// number in a struct field only, which sqllease cannot read without
// importing the driver. A program that passes its own go-sql-driver pool
// to sqllease.New should import this package too (a blank import will
// do); without it deadlocks are returned as errors instead of retried.
//
// The Locker is backend/sql's: one row per name, one statement per
// operation (MariaDB 10.5+; MySQL 8's Acquire takes a transaction of two),
// expiry judged by the server's UTC_TIMESTAMP(6); see package sqllease.
//
// # URL
//
//	mysql://user:password@host:3306/database
//	mysql://user:password@unix(/run/mysqld/mysqld.sock)/database
//	mysql://user:password@/database?socket=/run/mysqld/mysqld.sock
//
// Query parameters of the Locker's: table ([database.]name, default
// "leases"), autocreate (false to leave creating the table to you),
// max_conns and max_idle_conns (the pool's bound, default 32, and how
// many idle connections it keeps, default 16; see sqllease.WithPoolSize),
// and socket (a Unix socket's path, instead of the host).
//
// Every other parameter goes to go-sql-driver's DSN parser, as in a DSN:
// tls (true, false, skip-verify, preferred, or a name given to
// mysql.RegisterTLSConfig, which is how a CA of your own is given),
// timeout, readTimeout, writeTimeout, charset, collation, loc, parseTime,
// maxAllowedPacket, ... configure the connection; any other is a system
// variable set at connect (sql_mode, time_zone, innodb_lock_wait_timeout,
// ...). The server refuses a variable it does not know, or a bad value,
// and Open then fails with an error matching lease.ErrInvalid that names
// it. Refused before connecting: clientFoundRows (it changes the counts
// the Locker reads), autocommit other than 1 (the Locker's writes would
// never commit, and other connections would wait on their locks),
// password= (the driver would SET PASSWORD; the password goes in the
// user information), and the character sets big5, sjis, cp932, gbk and
// gb18030. The pool sends each statement with its arguments interpolated
// (interpolateParams, always on), one round trip instead of three, which
// those character sets make unsafe.
//
// Open is bounded by its context: connecting, the catalog check and
// CREATE TABLE all end when ctx does, also on a server that accepts the
// connection and never answers. The pool's connections log nothing:
// go-sql-driver would otherwise print lines such as "[mysql] packets.go:
// unexpected EOF" to the program's stderr (its errors still reach the
// caller). No error quotes the URL's password.
package mysqllease
