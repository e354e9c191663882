package sqllease

import (
	"database/sql"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"

	"github.com/leasekit/lease"
)

// Dialect is the SQL flavour a Locker speaks.
type Dialect int

// The supported dialects. The zero Dialect means "detect it from the
// *sql.DB's driver".
const (
	// SQLite is SQLite 3.42 or later (for unixepoch('subsec')), as
	// modernc.org/sqlite (driver name "sqlite") bundles.
	SQLite Dialect = iota + 1
	// PostgreSQL is PostgreSQL 12 or later, through any driver (pgx's
	// database/sql driver "pgx" is detected). CockroachDB should work
	// through it but is untested.
	PostgreSQL
	// MySQL is MariaDB 10.5 or later, where every operation is one
	// statement, or MySQL 8, where a contended Acquire takes a
	// transaction of two statements (see the package documentation).
	MySQL
)

// String returns the dialect's name: "sqlite", "postgresql" or "mysql".
func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case PostgreSQL:
		return "postgresql"
	case MySQL:
		return "mysql"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

func (d Dialect) valid() bool { return d >= SQLite && d <= MySQL }

// detectDialect names the dialect of db's driver, or fails with a hint to
// use WithDialect.
func detectDialect(db *sql.DB) (Dialect, error) {
	switch drv := db.Driver().(type) {
	case *sqlite.Driver:
		return SQLite, nil
	case *stdlib.Driver:
		return PostgreSQL, nil
	case *mysql.MySQLDriver, mysql.MySQLDriver:
		return MySQL, nil
	default:
		// Drivers this package does not import, recognised by their
		// package path (lib/pq, mattn/go-sqlite3, ...).
		t := reflect.TypeOf(drv)
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		path := ""
		if t != nil {
			path = t.PkgPath()
		}
		switch {
		case strings.Contains(path, "sqlite"):
			return SQLite, nil
		case strings.Contains(path, "pq"), strings.Contains(path, "pgx"):
			return PostgreSQL, nil
		case strings.Contains(path, "mysql"):
			return MySQL, nil
		}
		return 0, fmt.Errorf("%w: cannot tell the SQL dialect of driver %T: pass WithDialect", lease.ErrInvalid, drv)
	}
}

// tablePattern is what WithTable accepts: an identifier of up to 63
// characters, optionally qualified by a schema (or, on SQLite, an attached
// database name). It is never quoted, so PostgreSQL folds it to lower case.
var tablePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)

// checkTable reports whether table is an identifier this package will
// interpolate into SQL. The error matches lease.ErrInvalid.
func checkTable(table string) error {
	if !tablePattern.MatchString(table) {
		return fmt.Errorf("%w: table name %q is not an identifier (want [schema.]name of letters, digits and _, up to 63 each, not starting with a digit)", lease.ErrInvalid, table)
	}
	return nil
}

// splitTable returns table's schema (empty if unqualified) and name.
func splitTable(table string) (schema, name string) {
	if i := strings.IndexByte(table, '.'); i >= 0 {
		return table[:i], table[i+1:]
	}
	return "", table
}
