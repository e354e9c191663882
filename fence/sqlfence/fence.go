package sqlfence

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/fence"
	"github.com/leasekit/lease/internal/sqlcatalog"
)

// Fence keeps the fences of one database in one table, and checks writes
// against them inside the caller's transactions. It is safe for
// concurrent use and holds no connection of its own.
type Fence struct {
	db      *sql.DB
	dialect Dialect
	table   string
	stmt    string
}

var _ fence.Checker = (*Fence)(nil)

type config struct {
	table      string
	dialect    Dialect
	autoCreate bool
	err        error
}

// Option configures New.
type Option func(*config)

// WithTable keeps the fences in table instead of DefaultTable. table must
// be an identifier ([A-Za-z_][A-Za-z0-9_]*, up to 63 characters),
// optionally qualified by a schema ("app.lease_fences"); it is put into
// SQL unquoted, so PostgreSQL folds it to lower case. New fails with an
// error matching lease.ErrInvalid otherwise.
func WithTable(table string) Option {
	return func(c *config) {
		if err := sqlcatalog.CheckTable(table); err != nil && c.err == nil {
			c.err = err
		}
		c.table = table
	}
}

// WithDialect sets the SQL dialect instead of detecting it from the
// driver's package path, for drivers New does not recognise.
func WithDialect(d Dialect) Option {
	return func(c *config) {
		if !d.valid() && c.err == nil {
			c.err = fmt.Errorf("%w: unknown SQL dialect %v", lease.ErrInvalid, d)
		}
		c.dialect = d
	}
}

// WithoutAutoCreate stops New from looking the table up and creating it:
// New then sends nothing to the database, and the first check fails with
// the database's "no such table" error if the table is missing. Create it
// with the statement Schema returns, in your migrations.
func WithoutAutoCreate() Option {
	return func(c *config) { c.autoCreate = false }
}

// New returns a Fence for db, a pool the caller owns (the Fence never
// closes it). The dialect is detected from the package path of db's
// driver (modernc.org/sqlite, mattn/go-sqlite3, jackc/pgx, lib/pq,
// go-sql-driver/mysql) unless WithDialect is given; no driver is imported.
//
// Unless WithoutAutoCreate is given, New asks the database's catalog
// whether the fence table exists and creates it if not (Schema's
// statement). It does so here, once, rather than on the first check,
// because a check runs inside the caller's transaction, where a CREATE
// TABLE would commit it early (MySQL) or wait on its own lock (SQLite).
func New(ctx context.Context, db *sql.DB, opts ...Option) (*Fence, error) {
	if db == nil {
		return nil, fmt.Errorf("fence/sql: %w: nil *sql.DB", lease.ErrInvalid)
	}
	c := config{table: DefaultTable, autoCreate: true}
	for _, o := range opts {
		o(&c)
	}
	if c.err != nil {
		return nil, fmt.Errorf("fence/sql: %w", c.err)
	}
	if c.dialect == 0 {
		d, err := detectDialect(db)
		if err != nil {
			return nil, fmt.Errorf("fence/sql: %w", err)
		}
		c.dialect = d
	}
	f := &Fence{db: db, dialect: c.dialect, table: c.table, stmt: buildStatement(c.dialect, c.table)}
	if c.autoCreate {
		if err := f.Create(ctx); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Dialect returns the SQL dialect of the Fence's statements.
func (f *Fence) Dialect() Dialect { return f.dialect }

// Table returns the name of the fence table.
func (f *Fence) Table() string { return f.table }

// Create makes sure the fence table exists: it asks the database's catalog
// and, if the table is missing, runs Schema's CREATE TABLE IF NOT EXISTS.
// New calls it unless WithoutAutoCreate is given. The existence check
// never probes the table with a query that would fail (and abort a
// PostgreSQL transaction).
func (f *Fence) Create(ctx context.Context) error {
	exists, err := f.tableExists(ctx)
	if err != nil {
		return fmt.Errorf("fence/sql: looking up table %s in the catalog: %w", f.table, err)
	}
	if exists {
		return nil
	}
	ddl, _ := Schema(f.dialect, f.table)
	if _, err := f.db.ExecContext(ctx, ddl); err != nil {
		// Two processes creating the table at once can collide even with
		// IF NOT EXISTS (PostgreSQL's pg_type entry): fine if it is there.
		if ok, err2 := f.tableExists(ctx); err2 != nil || !ok {
			return fmt.Errorf("fence/sql: creating table %s: %w", f.table, err)
		}
	}
	return nil
}

// tableExists asks the database's catalog whether the table exists.
func (f *Fence) tableExists(ctx context.Context) (bool, error) {
	return sqlcatalog.TableExists(ctx, f.db, f.dialect.flavour(), f.table)
}
