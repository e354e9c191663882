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
