package sqllease

import (
	"fmt"

	"github.com/leasekit/lease"
)

// Option configures a Locker made by New or OpenConnector (and by the
// dialect packages' Open). An Option with a bad value makes them fail
// with an error matching lease.ErrInvalid.
type Option func(*options) error

type options struct {
	table      string
	dialect    Dialect
	autoCreate bool

	// poolSet says WithPoolSize was given; maxOpen and maxIdle are its
	// values.
	poolSet          bool
	maxOpen, maxIdle int

	// listener is WithListener's.
	listener Listener
}

// The pool that OpenConnector builds (and so the dialect packages' Open
// and lease.Open) holds at most DefaultMaxOpenConns connections, of which
// it keeps up to DefaultMaxIdleConns open while idle. WithPoolSize, or the
// URL parameters max_conns and max_idle_conns, change them.
const (
	DefaultMaxOpenConns = 32
	DefaultMaxIdleConns = 16
)

// WithPoolSize bounds the pool that OpenConnector builds (and the dialect
// packages' Open, which take it too): at most open connections to the
// database, calls beyond that waiting for one (within their context), and
// up to idle of them kept open while unused. open must be at least 1 and
// idle between 0 and open. The defaults are DefaultMaxOpenConns and
// DefaultMaxIdleConns.
//
// New refuses it: a *sql.DB given to New is the caller's, left as they
// configured it (db.SetMaxOpenConns, db.SetMaxIdleConns).
func WithPoolSize(open, idle int) Option {
	return func(o *options) error {
		if open < 1 || idle < 0 || idle > open {
			return fmt.Errorf("%w: WithPoolSize(%d, %d): want at least 1 connection, and between 0 and that many idle", lease.ErrInvalid, open, idle)
		}
		o.poolSet, o.maxOpen, o.maxIdle = true, open, idle
		return nil
	}
}

// WithTable makes the Locker keep its rows in table instead of
// DefaultTable. table must be an identifier ([A-Za-z_][A-Za-z0-9_]*, up to
// 63 characters), optionally qualified by a schema ("jobs.leases"); it is
// interpolated into SQL unquoted, so PostgreSQL folds it to lower case. A
// temporary table is refused: named in SQLite's temp or PostgreSQL's
// pg_temp schema, by New, and found temporary by the catalog, by the
// first operation (see the package documentation).
func WithTable(table string) Option {
	return func(o *options) error {
		if err := checkTable(table); err != nil {
			return err
		}
		o.table = table
		return nil
	}
}

// WithDialect sets the SQL dialect instead of detecting it from the
// driver, for drivers this package does not recognise (a driver wrapped
// for tracing, say).
func WithDialect(d Dialect) Option {
	return func(o *options) error {
		if !d.valid() {
			return fmt.Errorf("%w: WithDialect(%d): unknown SQL dialect", lease.ErrInvalid, int(d))
		}
		o.dialect = d
		return nil
	}
}

// WithoutAutoCreate stops the Locker from creating its table: the first
// operation then fails with a clear error if the table does not exist.
// Create it with the statement Schema returns.
func WithoutAutoCreate() Option {
	return func(o *options) error {
		o.autoCreate = false
		return nil
	}
}
