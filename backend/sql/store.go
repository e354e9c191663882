package sqllease

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/combine"

	"github.com/leasekit/lease"
)

// store is the driver.Store of a Locker: one table on one pool. Before its
// first operation it sets itself up (setup): it asks the catalog where the
// table is and whether it is temporary, creates it if it is missing and
// auto-create is on, and on MySQL asks whether the server has INSERT ...
// RETURNING.
type store struct {
	db         *sql.DB
	ownsDB     bool // Close closes db (OpenConnector made it)
	dialect    Dialect
	table      string // as the user named it
	autoCreate bool
	host       string

	// setupSlot is held while one call sets up, so that a call waiting
	// for it can give up when its own context ends.
	setupSlot chan struct{}
	// ready is set once setup has succeeded; q and noReturning are
	// written before it and never after.
	ready atomic.Bool
	// q are the statements, naming the table by the schema the catalog
	// resolved it in.
	q *queries
	// noReturning is set on MySQL servers without INSERT ... RETURNING
	// (MySQL 8, MariaDB before 10.5): Acquire then takes a transaction.
	noReturning bool
	// noJSONTable is set on MySQL servers without JSON_TABLE (before
	// MySQL 8.0.4 and MariaDB 10.6): RenewBatch then renews one tenure
	// at a time.
	noJSONTable bool
	// rowAlias is set on MySQL 8.0.19 and later: Acquire's upsert names
	// the inserted row (acquireUpsertAlias) instead of using VALUES(),
	// which 8.0.20 deprecates. Never on MariaDB, which has no row alias.
	rowAlias bool
	// acquireSlots bounds the Acquires in flight at once to fewer than
	// the pool's connections (nil: no bound), so that renewals and
	// releases never wait for a connection behind a burst of Acquires:
	// database/sql hands a freed connection to a random waiter, and a
	// renewal that waits past its lease's Deadline loses the lease.
	acquireSlots chan struct{}
	// batchChunk is the most tenures RenewBatch renews in one statement
	// (maxBatchChunk; tests make it smaller).
	batchChunk int

	// acquires holds the Acquires waiting to share a statement
	// (acquire_batch.go); its lanes are acquireSlots.
	acquires combine.Queue[*acquireReq, driver.Tenure]
	// renews holds the Renews waiting to share a statement (ops.go).
	renews combine.Queue[driver.RenewItem, driver.RenewOutcome]
	// releases holds the Releases waiting to share a statement
	// (release_shared.go).
	releases combine.Queue[driver.Tenure, bool]
	// held is the names found held by another owner, which MySQL's
	// Acquires read before they write (held.go).
	held heldNames
	// acquireBatches counts the batches sent, and slotWaiters the calls
	// waiting in takeSlot for an acquire slot (tests read them).
	acquireBatches atomic.Int64
	slotWaiters    atomic.Int64

	// listener opens the listening connection of Watch (nil: the Locker
	// cannot watch); hub is that side (listen.go), and qualified the
	// table as the catalog named it, which names its channel.
	listener  Listener
	hub       listening
	qualified string

	// marks is the marks table (schema.go) as the catalog found it, in
	// the lease table's schema, on PostgreSQL; empty when there is none
	// (another dialect, or a marks table that is missing and could not be
	// created), and noMarks then says why. Written by setup, before ready.
	marks, noMarks string
}

// Close implements driver.Store: it closes the pool if OpenConnector made
// it. A pool passed to New stays open.
func (s *store) Close() error {
	s.hub.close()
	if s.ownsDB {
		return s.db.Close()
	}
	return nil
}

// setup makes the store ready before its first operation, and again after
// a failed attempt. It returns by the time ctx ends, also when another
// call is setting up.
func (s *store) setup(ctx context.Context) error {
	if s.ready.Load() {
		return nil
	}
	select {
	case s.setupSlot <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.setupSlot }()
	if s.ready.Load() {
		return nil
	}
	if err := s.prepare(ctx); err != nil {
		return s.fail(err)
	}
	s.ready.Store(true)
	return nil
}

// prepare does the work of setup. The table's existence is asked of the
// catalog, never probed with a query that would fail (and abort a
// caller's PostgreSQL transaction).
func (s *store) prepare(ctx context.Context) error {
	if s.dialect == MySQL {
		var version string
		if err := retry(ctx, s.dialect, func() error {
			return s.db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&version)
		}); err != nil {
			return fmt.Errorf("asking the server version: %w", err)
		}
		s.chooseByVersion(version)
	}
	t, err := s.lookup(ctx)
	if err != nil {
		return err
	}
	if !t.exists && t.temporary == "" {
		if !s.autoCreate {
			return fmt.Errorf("it does not exist and auto-create is off: create it with sqllease.Schema(%s, %q)", s.dialect, s.table)
		}
		ddl, err := Schema(s.dialect, s.table)
		if err != nil {
			return err
		}
		if err := retry(ctx, s.dialect, func() error {
			_, err := s.db.ExecContext(ctx, ddl)
			return err
		}); err != nil {
			// Two lockers creating the table at once can collide even
			// with IF NOT EXISTS (PostgreSQL's pg_type entry): fine if
			// the table is there now.
			if t, err2 := s.lookup(ctx); err2 != nil || !t.exists {
				return fmt.Errorf("creating it: %w", err)
			}
		}
		if t, err = s.lookup(ctx); err != nil {
			return err
		}
		if !t.exists && t.temporary == "" {
			return errors.New("the catalog does not list it after CREATE TABLE")
		}
	}
	if t.temporary != "" {
		return fmt.Errorf("%w: it is a temporary table (%s): each connection has its own, so Lockers on other connections would not see its leases and would grant the same names", lease.ErrInvalid, t.temporary)
	}
	if s.dialect == PostgreSQL {
		s.marks, s.noMarks = s.prepareMarks(ctx, t)
	}
	s.q = buildQueries(s.dialect, t.qualified, s.marks)
	s.qualified = t.qualified
	return nil
}

// prepareMarks finds the marks table of a PostgreSQL lease table, in its
// schema, and creates it when it is missing and auto-create is on (also
// beside a lease table created before marks existed). It returns the
// table's qualified name, or "" and why there is none: a Locker without a
// marks table works as before, its turn watches unsupported, so that a
// database whose operator did not create it, or a role that may not, is
// no reason to fail.
func (s *store) prepareMarks(ctx context.Context, t catalogEntry) (marks, why string) {
	if t.marksColumns < 0 && s.autoCreate {
		ddl := strings.ReplaceAll(postgresMarksSchema, "{M}", t.marks)
		err := retry(ctx, s.dialect, func() error {
			_, err := s.db.ExecContext(ctx, ddl)
			return err
		})
		if err == nil {
			return t.marks, ""
		}
		// Another Locker may have created it at the same moment.
		if t2, err2 := s.lookup(ctx); err2 == nil && t2.marksColumns >= 0 {
			t = t2
		} else {
			return "", fmt.Sprintf("the marks table %s is missing and could not be created (%v)", t.marks, err)
		}
	}
	switch {
	case t.marksColumns < 0:
		return "", fmt.Sprintf("the marks table %s is missing (auto-create is off: create it with sqllease.Schema)", t.marks)
	case t.marksColumns < 4:
		return "", fmt.Sprintf("the table %s is not a marks table (it lacks lease_key, waiter, placed_us or lapses_at)", t.marks)
	}
	return t.marks, ""
}

// catalogEntry is what the catalog says about the table.
type catalogEntry struct {
	exists bool
	// qualified names the table with the schema (database, on MySQL)
	// it was found in, for the statements: a temporary table that a
	// connection of the pool creates later, or a connection's own
	// search_path, cannot make them reach another table (except on
	// MySQL, where a temporary table shadows even a qualified name).
	qualified string
	// temporary, when not empty, says how the catalog showed that the
	// name resolves to a temporary table.
	temporary string
	// On PostgreSQL, when the table exists: marks is its marks table,
	// named with the table's schema, and marksColumns how many of the
	// marks columns that table has (4), or -1 when it does not exist.
	marks        string
	marksColumns int
}

// lookup asks the catalog about the table.
func (s *store) lookup(ctx context.Context) (catalogEntry, error) {
	var e catalogEntry
	err := retry(ctx, s.dialect, func() (err error) {
		e, err = s.lookupOnce(ctx)
		return err
	})
	if err != nil {
		return catalogEntry{}, fmt.Errorf("looking it up in the catalog: %w", err)
	}
	return e, nil
}

func (s *store) lookupOnce(ctx context.Context) (catalogEntry, error) {
	schema, name := splitTable(s.table)
	e := catalogEntry{qualified: s.table}
	switch s.dialect {
	case SQLite:
		if schema != "" {
			// main or an attached database (temp was refused by New).
			var n int
			err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM `+schema+`.sqlite_master WHERE type = 'table' AND name = ?1 COLLATE NOCASE`, name).Scan(&n)
			e.exists = n > 0
			return e, err
		}
		// An unqualified name resolves to a temporary table first, so
		// one on this connection is refused; the statements name main.
		var inMain, inTemp int
		err := s.db.QueryRowContext(ctx, `SELECT
	(SELECT count(*) FROM main.sqlite_master WHERE type = 'table' AND name = ?1 COLLATE NOCASE),
	(SELECT count(*) FROM sqlite_temp_master WHERE type = 'table' AND name = ?1 COLLATE NOCASE)`, name).Scan(&inMain, &inTemp)
		e.exists, e.qualified = inMain > 0, "main."+name
		if inTemp > 0 {
			e.temporary = "sqlite_temp_master lists it, so an unqualified name means the temporary table"
		}
		return e, err
	case PostgreSQL:
		// to_regclass resolves the name as the statements would (search
		// path, pg_temp first, case folding) and gives NULL instead of
		// failing.
		// The same question finds the marks table in the table's
		// schema (the left join) and counts its columns.
		var n, marksColumns int
		var qualified, persistence, marks string
		err := s.db.QueryRowContext(ctx, `SELECT count(*),
	coalesce(max(quote_ident(n.nspname) || '.' || quote_ident(c.relname)), ''),
	coalesce(max(c.relpersistence::text), ''),
	coalesce(max(quote_ident(n.nspname) || '.' || quote_ident($2::text)), ''),
	coalesce(max(CASE WHEN m.oid IS NULL THEN -1 ELSE (SELECT count(*) FROM pg_catalog.pg_attribute a
		WHERE a.attrelid = m.oid AND a.attnum > 0 AND NOT a.attisdropped
		AND a.attname IN ('lease_key', 'waiter', 'placed_us', 'lapses_at')) END), -1)
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_catalog.pg_class m ON m.relnamespace = c.relnamespace AND m.relname = $2::text AND m.relkind IN ('r', 'p')
WHERE c.oid = to_regclass($1::text)`, s.table, marksName(name)).Scan(&n, &qualified, &persistence, &marks, &marksColumns)
		e.exists = n > 0
		if e.exists {
			e.qualified, e.marks, e.marksColumns = qualified, marks, marksColumns
		}
		if persistence == "t" {
			e.temporary = "pg_class.relpersistence is 't'"
		}
		return e, err
	case MySQL:
		// MySQL and MariaDB before 11.2 do not list temporary tables
		// in information_schema; MariaDB 11.2 and later list them with
		// table_type TEMPORARY.
		var (
			n, temp int
			db      sql.NullString
			sch     any
		)
		if schema != "" {
			sch = schema
		}
		err := s.db.QueryRowContext(ctx, `SELECT count(*), COALESCE(SUM(table_type LIKE '%TEMPORARY%'), 0), COALESCE(?, DATABASE())
FROM information_schema.tables WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?`, sch, sch, name).Scan(&n, &temp, &db)
		if err != nil {
			return e, err
		}
		if !db.Valid {
			return e, fmt.Errorf("%w: the connection has no default database: name one in the URL or qualify the table (WithTable(\"db.%s\"))", lease.ErrInvalid, name)
		}
		e.exists = n > temp
		e.qualified = "`" + strings.ReplaceAll(db.String, "`", "``") + "`." + name
		if temp > 0 {
			e.temporary = "information_schema lists a temporary table of that name"
		}
		return e, nil
	}
	return e, fmt.Errorf("unknown dialect %v", s.dialect)
}

// chooseByVersion sets the choices a MySQL-dialect server's VERSION()
// makes: whether Acquire takes a transaction, how RenewBatch renews, and
// which form of the upsert Acquire sends.
func (s *store) chooseByVersion(version string) {
	s.noReturning = !mariaDBReturning(version)
	s.noJSONTable = !mysqlJSONTable(version)
	// MySQL refuses a row alias that is the table's name (both are
	// names of rows in the statement), so a table called new keeps
	// VALUES().
	_, name := splitTable(s.table)
	s.rowAlias = mysqlRowAlias(version) && !strings.EqualFold(name, "new")
}

// mysqlRowAlias reports whether a MySQL-dialect server's VERSION() names
// MySQL 8.0.19 or later, which can name the inserted row of INSERT ... ON
// DUPLICATE KEY UPDATE (AS new) instead of VALUES(). MariaDB, of any
// version, cannot; neither can a version this does not read as
// major.minor.patch, which keeps VALUES(), deprecated but run by every
// version.
func mysqlRowAlias(version string) bool {
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return false
	}
	var major, minor, patch int
	if n, _ := fmt.Sscanf(version, "%d.%d.%d", &major, &minor, &patch); n < 3 {
		return false
	}
	return major > 8 || (major == 8 && (minor > 0 || patch >= 19))
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

// mysqlJSONTable reports whether a MySQL-dialect server's VERSION() names
// a server with JSON_TABLE: MariaDB 10.6 or later, MySQL 8.0.4 or later.
// An unknown version is taken not to have it.
func mysqlJSONTable(version string) bool {
	var major, minor, patch int
	if n, _ := fmt.Sscanf(version, "%d.%d.%d", &major, &minor, &patch); n < 2 {
		return false
	}
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return major > 10 || (major == 10 && minor >= 6)
	}
	return major > 8 || (major == 8 && (minor > 0 || patch >= 4))
}

// errClosedPool is matched to say clearly that the caller closed its pool.
var errClosedPool = errors.New("the *sql.DB was closed")

// dbClosed is database/sql's error for a call on a closed *sql.DB, which
// it does not export. It is taken, once, from a pool closed for the
// purpose, so that errors are matched by identity, not by their text.
var dbClosed = sync.OnceValue(func() error {
	db := sql.OpenDB(noConnector{})
	db.Close()
	return db.PingContext(context.Background())
})

type noConnector struct{}

func (noConnector) Connect(context.Context) (sqldriver.Conn, error) {
	return nil, errors.New("no connector")
}
func (noConnector) Driver() sqldriver.Driver { return nil }

// fail describes an error of the store: the table it concerns, or that
// the caller closed the pool.
func (s *store) fail(err error) error {
	if errors.Is(err, dbClosed()) {
		return fmt.Errorf("%w: %w", errClosedPool, err)
	}
	return fmt.Errorf("%s table %s: %w", s.dialect, s.table, err)
}
