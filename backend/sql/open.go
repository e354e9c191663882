package sqllease

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease"
)

// OpenConnector opens a pool on c and returns a Locker that owns it (Close
// closes it), after checking, within ctx, that the database answers and
// that the table exists or was created. A database that does not answer
// makes it return by the time ctx ends, with an error matching ctx's.
//
// It is what the dialect packages' Open functions call once they have
// turned a URL into a connector (backend/sql/postgres, backend/sql/mysql,
// backend/sql/sqlite); call it with a connector of your own (pgx's
// stdlib.GetConnector, go-sql-driver's mysql.NewConnector) to get the same
// from a driver configuration. The pool holds at most DefaultMaxOpenConns
// connections and keeps up to DefaultMaxIdleConns idle ones, each for up
// to a minute; WithPoolSize changes both.
func OpenConnector(ctx context.Context, c sqldriver.Connector, opts ...Option) (*Locker, error) {
	if c == nil {
		return nil, fmt.Errorf("lease/sql: open: %w: nil driver.Connector", lease.ErrInvalid)
	}
	o, err := parseOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("lease/sql: open: %w", err)
	}
	db := sql.OpenDB(c)
	// database/sql opens as many connections as there are concurrent
	// calls (a burst of 64 opened 52 PostgreSQL backends) and keeps 2 idle
	// ones: bound the first, and keep enough idle that moderate
	// contention does not pay for a new connection per statement.
	db.SetMaxOpenConns(o.maxOpen)
	db.SetMaxIdleConns(o.maxIdle)
	db.SetConnMaxIdleTime(time.Minute)
	l, err := newLocker(db, o)
	if err == nil {
		l.s.ownsDB = true
		err = l.s.check(ctx)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("lease/sql: open: %w", err)
	}
	return l, nil
}

// check makes sure the database answers and the table is ready, within
// ctx.
func (s *store) check(ctx context.Context) error {
	// A busy SQLite file can refuse a new connection's pragmas (SQLITE_BUSY
	// from journal_mode(WAL) while another process holds a lock); a ping
	// writes nothing, so it is tried again like a statement.
	if err := retry(ctx, s.dialect, func() error { return s.db.PingContext(ctx) }); err != nil {
		return withContext(ctx, fmt.Errorf("connecting to the %s database: %w", s.dialect, err))
	}
	if err := s.setup(ctx); err != nil {
		return withContext(ctx, err)
	}
	return nil
}

// withContext makes err match ctx's error when ctx has ended, whatever the
// driver made of it: a timeout reads as a timeout.
func withContext(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}
