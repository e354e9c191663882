package sqllease

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// Locker is a lease store in one SQL table. It implements lease.Locker,
// lease.Lister, lease.ForceReleaser and driver.Watcher, has RenewBatch,
// and is safe for concurrent use. Its Watch works only with a Listener
// (WithListener, PostgreSQL), and only then, with the table's marks
// table, does it keep a line of waiters (lease.Run's WithWait wakes one
// waiter per release, and WithFairWait works): lease.Can says which, and
// elsewhere Watch reports errors.ErrUnsupported and lease.Run polls. See
// "Waiting" in the package documentation.
type Locker struct {
	*base
	s *store
}

// base is the shared lease.Locker machinery every backend is built on.
type base = driver.Locker

var (
	_ lease.Locker         = (*Locker)(nil)
	_ lease.Lister         = (*Locker)(nil)
	_ lease.ForceReleaser  = (*Locker)(nil)
	_ driver.Lister        = (*store)(nil)
	_ driver.ForceReleaser = (*store)(nil)
	_ driver.Watcher       = (*store)(nil)
	_ driver.Watcher       = (*Locker)(nil)
)

// New returns a Locker that keeps its leases in a table of db, a pool the
// caller owns: Close leaves it open. The dialect is detected from db's
// driver unless WithDialect is given. New sends nothing to the database;
// the first operation checks the catalog for the table and, unless
// WithoutAutoCreate is given, creates it. A nil db, an unknown driver
// without WithDialect, and a bad option are errors matching
// lease.ErrInvalid.
//
// New imports no driver: db may come from any database/sql driver. Two
// things depend on the driver:
//
//   - For one round trip per operation on MySQL, open db with
//     interpolateParams=true (as backend/sql/mysql's Open does); otherwise
//     go-sql-driver prepares each statement on the server first.
//   - Statements the database rolled back whole (a deadlock) are sent
//     again. This package recognises them through SQLState() (pgx,
//     lib/pq) and, on SQLite, Code() (modernc.org/sqlite). go-sql-driver's
//     errors have neither: its deadlocks are recognised only in a program
//     that imports backend/sql/mysql (a blank import will do); without it
//     a deadlock is returned as the call's error, which is safe but
//     needless.
//
// Do not create a temporary table with the lease table's name on a
// connection of db: see "Temporary tables" in the package documentation.
func New(db *sql.DB, opts ...Option) (*Locker, error) {
	o, err := parseOptions(opts)
	var l *Locker
	switch {
	case err != nil:
	case o.poolSet:
		err = fmt.Errorf("%w: WithPoolSize applies to pools OpenConnector builds; bound a *sql.DB of your own with its SetMaxOpenConns and SetMaxIdleConns", lease.ErrInvalid)
	default:
		l, err = newLocker(db, o)
	}
	if err != nil {
		return nil, fmt.Errorf("lease/sql: New: %w", err)
	}
	return l, nil
}

// parseOptions applies opts to the defaults.
func parseOptions(opts []Option) (options, error) {
	o := options{table: DefaultTable, autoCreate: true, maxOpen: DefaultMaxOpenConns, maxIdle: DefaultMaxIdleConns}
	for i, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: option %d is nil", lease.ErrInvalid, i)
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// newLocker is New after parseOptions, without the error prefix, which
// OpenConnector words differently.
func newLocker(db *sql.DB, o options) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", lease.ErrInvalid)
	}
	if o.dialect == 0 {
		d, err := detectDialect(db)
		if err != nil {
			return nil, err
		}
		o.dialect = d
	}
	if err := checkPermanent(o.dialect, o.table); err != nil {
		return nil, err
	}
	if o.listener != nil && o.dialect != PostgreSQL {
		return nil, fmt.Errorf("%w: WithListener needs PostgreSQL (LISTEN/NOTIFY), and this Locker speaks %s", lease.ErrInvalid, o.dialect)
	}
	s := &store{
		db:         db,
		dialect:    o.dialect,
		table:      o.table,
		autoCreate: o.autoCreate,
		host:       hostName(),
		setupSlot:  make(chan struct{}, 1),
		batchChunk: maxBatchChunk,
		listener:   o.listener,
	}
	s.hub.init()
	s.acquireSlots = acquireSlots(db.Stats().MaxOpenConnections)
	lanes := poolLanes(db.Stats().MaxOpenConnections)
	s.acquires.Max, s.acquires.What = maxAcquireBatch, "Acquires"
	s.acquires.Key = func(r *acquireReq) string { return string(r.key[:]) }
	s.acquires.Turns = s.acquireSlots
	s.renews.Lanes, s.renews.Max, s.renews.What = lanes, maxBatchChunk, "renewals"
	s.releases.Lanes, s.releases.Max, s.releases.What = lanes, maxBatchChunk, "releases"
	if s.acquireSlots != nil {
		// Releases take the Acquires' turns.
		s.releases.Turns, s.releases.What = s.acquireSlots, "Acquires and Releases"
	}
	return &Locker{base: driver.NewLocker("sql", s), s: s}, nil
}

// Dialect returns the SQL dialect the Locker speaks.
func (l *Locker) Dialect() Dialect { return l.s.dialect }

// Table returns the name of the Locker's table, as given to WithTable (or
// DefaultTable).
func (l *Locker) Table() string { return l.s.table }

// MinCleanupAge is the shortest age Cleanup accepts.
const MinCleanupAge = time.Minute

// Cleanup deletes the rows of names whose last tenure ended (expired,
// or was released) more than olderThan ago by the database's clock, and
// returns how many it deleted. Use it when many short-lived names would
// otherwise leave a row each.
//
// Tokens stay in order across a deletion: a new row's first token is the
// database's time in milliseconds times 1000, and every later token at
// least that, so a name's next token exceeds its deleted row's last one
// unless that row saw over 1000 tenures per millisecond on average, or the
// database's clock stepped back by more than olderThan. olderThan must be
// at least MinCleanupAge; an hour or a day is a sensible choice.
func (l *Locker) Cleanup(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan < MinCleanupAge {
		return 0, fmt.Errorf("lease/sql: cleanup: %w: age %s is shorter than the minimum of %s", lease.ErrInvalid, olderThan, MinCleanupAge)
	}
	return l.cleanup(ctx, olderThan)
}

// cleanup is Cleanup without the minimum age, for tests.
func (l *Locker) cleanup(ctx context.Context, olderThan time.Duration) (int64, error) {
	err := ctx.Err()
	if l.Closed() {
		err = lease.ErrClosed
	}
	var n int64
	if err == nil {
		n, err = l.s.cleanup(ctx, olderThan)
	}
	if err != nil {
		return 0, fmt.Errorf("lease/sql: cleanup: %w", withContext(ctx, err))
	}
	return n, nil
}

// hostName is this machine's name, cut to fit the host column.
func hostName() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	h = strings.ToValidUTF8(h, "?")
	for len(h) > 255 {
		h = h[:len(h)-1]
		h = strings.ToValidUTF8(h, "")
	}
	return h
}
