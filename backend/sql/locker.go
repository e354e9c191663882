package sqllease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/leasekit/lease"
)

// Locker is a lease store in one SQL table. It implements lease.Locker,
// lease.Lister and lease.ForceReleaser, and is safe for concurrent use.
type Locker struct {
	db         *sql.DB
	ownsDB     bool
	dialect    Dialect
	table      string
	autoCreate bool
	host       string
	q          *queries

	closed atomic.Bool

	// setup runs once before the first operation, and again after a
	// failure: the catalog check, CREATE TABLE, and on MySQL the server
	// flavour.
	setupMu   sync.Mutex
	setupDone bool
	// noReturning is set on MySQL servers without INSERT ... RETURNING
	// (MySQL 8, MariaDB before 10.5): Acquire then takes a transaction.
	noReturning bool
	// forceNoReturning makes a MariaDB server take the MySQL 8 path, so
	// that tests can exercise it.
	forceNoReturning bool
}

var (
	_ lease.Locker        = (*Locker)(nil)
	_ lease.Lister        = (*Locker)(nil)
	_ lease.ForceReleaser = (*Locker)(nil)
)

type config struct {
	table      string
	dialect    Dialect
	autoCreate bool
	err        error
}

// Option configures a Locker made by New or Open.
type Option func(*config)

// WithTable makes the Locker keep its rows in table instead of
// DefaultTable. table must be an identifier ([A-Za-z_][A-Za-z0-9_]*, up to
// 63 characters), optionally qualified by a schema ("jobs.leases"); it is
// interpolated into SQL unquoted, so PostgreSQL folds it to lower case.
// New and Open fail with an error matching lease.ErrInvalid otherwise.
func WithTable(table string) Option {
	return func(c *config) {
		if err := checkTable(table); err != nil && c.err == nil {
			c.err = err
		}
		c.table = table
	}
}

// WithDialect sets the SQL dialect instead of detecting it from the
// driver, for drivers this package does not recognise.
func WithDialect(d Dialect) Option {
	return func(c *config) {
		if !d.valid() && c.err == nil {
			c.err = fmt.Errorf("%w: unknown SQL dialect %v", lease.ErrInvalid, d)
		}
		c.dialect = d
	}
}

// WithoutAutoCreate stops the Locker from creating its table: the first
// operation then fails with a clear error if the table does not exist.
// Create it with the statement Schema returns.
func WithoutAutoCreate() Option {
	return func(c *config) { c.autoCreate = false }
}

// New returns a Locker that keeps its leases in a table of db, a pool the
// caller owns: Close leaves it open. The dialect is detected from db's
// driver unless WithDialect is given. New sends nothing to the database;
// the first operation checks the catalog for the table and, unless
// WithoutAutoCreate is given, creates it.
//
// For one round trip per operation on MySQL, open db with
// interpolateParams=true (as Open does); otherwise go-sql-driver prepares
// each statement on the server first.
func New(db *sql.DB, opts ...Option) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: lease/sql: nil *sql.DB", lease.ErrInvalid)
	}
	c := config{table: DefaultTable, autoCreate: true}
	for _, o := range opts {
		o(&c)
	}
	if c.err != nil {
		return nil, fmt.Errorf("lease/sql: %w", c.err)
	}
	if c.dialect == 0 {
		d, err := detectDialect(db)
		if err != nil {
			return nil, fmt.Errorf("lease/sql: %w", err)
		}
		c.dialect = d
	}
	return &Locker{
		db:         db,
		dialect:    c.dialect,
		table:      c.table,
		autoCreate: c.autoCreate,
		host:       hostName(),
		q:          buildQueries(c.dialect, c.table),
	}, nil
}

// Dialect returns the SQL dialect the Locker speaks.
func (l *Locker) Dialect() Dialect { return l.dialect }

// Table returns the name of the Locker's table.
func (l *Locker) Table() string { return l.table }

// Close marks the Locker closed, so that later calls fail with an error
// matching lease.ErrClosed, and closes the pool if Open opened it. A pool
// passed to New stays open. Held leases are not released: they expire.
// Close is safe to call more than once.
func (l *Locker) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	if l.ownsDB {
		if err := l.db.Close(); err != nil {
			return fmt.Errorf("lease/sql: close: %w", err)
		}
	}
	return nil
}

// begin fails when the Locker is closed, and otherwise makes sure the
// table is there.
func (l *Locker) begin(ctx context.Context) error {
	if l.closed.Load() {
		return lease.ErrClosed
	}
	return l.setup(ctx)
}

// setup checks the catalog for the table, creates it if it is missing
// (and auto-create is on), and on MySQL asks whether the server has INSERT
// ... RETURNING. It runs before the first operation and again after a
// failure. The table's existence is asked of the catalog, never probed with
// a query that would fail (and abort a PostgreSQL transaction).
func (l *Locker) setup(ctx context.Context) error {
	l.setupMu.Lock()
	defer l.setupMu.Unlock()
	if l.setupDone {
		return nil
	}
	if l.dialect == MySQL {
		var version string
		if err := retry(ctx, func() error {
			return l.db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&version)
		}); err != nil {
			return fmt.Errorf("lease/sql: asking the server version: %w", err)
		}
		l.noReturning = l.forceNoReturning || !mariaDBReturning(version)
	}
	var exists bool
	err := retry(ctx, func() (err error) {
		exists, err = l.tableExists(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("lease/sql: looking up table %s in the catalog: %w", l.table, err)
	}
	if !exists {
		if !l.autoCreate {
			return fmt.Errorf("lease/sql: table %s does not exist and auto-create is off: create it with sqllease.Schema(%s, %q)", l.table, l.dialect, l.table)
		}
		ddl, _ := Schema(l.dialect, l.table)
		if err := retry(ctx, func() error {
			_, err := l.db.ExecContext(ctx, ddl)
			return err
		}); err != nil {
			// Two lockers creating the table at once can collide even
			// with IF NOT EXISTS (PostgreSQL's pg_type entry): fine if
			// the table is there now.
			if ok, err2 := l.tableExists(ctx); err2 != nil || !ok {
				return fmt.Errorf("lease/sql: creating table %s: %w", l.table, err)
			}
		}
	}
	l.setupDone = true
	return nil
}

// tableExists asks the database's catalog whether the table exists.
func (l *Locker) tableExists(ctx context.Context) (bool, error) {
	schema, name := splitTable(l.table)
	var n int
	var err error
	switch l.dialect {
	case SQLite:
		master := "sqlite_master"
		if schema != "" {
			master = schema + ".sqlite_master"
		}
		err = l.db.QueryRowContext(ctx, `SELECT count(*) FROM `+master+` WHERE type = 'table' AND name = ?1 COLLATE NOCASE`, name).Scan(&n)
	case PostgreSQL:
		// to_regclass resolves the name as the statements will (search
		// path, case folding) and returns NULL instead of failing.
		err = l.db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT to_regclass($1::text) AS r) x WHERE r IS NOT NULL`, l.table).Scan(&n)
	case MySQL:
		var s any
		if schema != "" {
			s = schema
		}
		err = l.db.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?`, s, name).Scan(&n)
	}
	return n > 0, err
}

// mariaDBReturning reports whether a MySQL-dialect server's VERSION()
// names MariaDB 10.5 or later, which has INSERT ... RETURNING.
func mariaDBReturning(version string) bool {
	if !strings.Contains(strings.ToLower(version), "mariadb") {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 10 || (major == 10 && minor >= 5)
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

// errClosedPool is matched to say clearly that the caller closed its pool.
var errClosedPool = errors.New("the *sql.DB was closed")

func (l *Locker) wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, lease.ErrClosed) {
		return fmt.Errorf("lease/sql: %s %q: %w", op, name, err)
	}
	// database/sql has no exported error for a closed pool.
	if err.Error() == "sql: database is closed" {
		if l.closed.Load() {
			// Our own Close raced with this call.
			return fmt.Errorf("lease/sql: %s %q: %w: %w", op, name, lease.ErrClosed, err)
		}
		return fmt.Errorf("lease/sql: %s %q: %w: %w", op, name, errClosedPool, err)
	}
	return fmt.Errorf("lease/sql: %s %q on %s table %s: %w", op, name, l.dialect, l.table, err)
}
