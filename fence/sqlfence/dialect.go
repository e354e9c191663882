package sqlfence

import (
	"database/sql"
	"fmt"
	"path"
	"reflect"
	"regexp"
	"strings"

	"github.com/leasekit/lease"
)

// Dialect is the SQL flavour of a Fence's statements.
type Dialect int

// The supported dialects. The zero Dialect means "detect it from the
// *sql.DB's driver".
const (
	// SQLite is SQLite 3.35 or later (upsert with RETURNING), such as
	// modernc.org/sqlite or mattn/go-sqlite3.
	SQLite Dialect = iota + 1
	// PostgreSQL is PostgreSQL 9.5 or later (ON CONFLICT), through any
	// driver (pgx's "pgx", lib/pq).
	PostgreSQL
	// MySQL is MySQL 5.7 or later, or MariaDB 10.2 or later, through
	// go-sql-driver/mysql.
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

// detectDialect names the dialect of db's driver from the package path
// of its type, so that this package imports no driver.
func detectDialect(db *sql.DB) (Dialect, error) {
	drv := db.Driver()
	t := reflect.TypeOf(drv)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pkg := ""
	if t != nil {
		pkg = t.PkgPath()
	}
	switch {
	case strings.Contains(pkg, "sqlite"):
		return SQLite, nil
	case strings.Contains(pkg, "pgx"), path.Base(pkg) == "pq", strings.Contains(pkg, "postgres"):
		return PostgreSQL, nil
	case strings.Contains(pkg, "mysql"):
		return MySQL, nil
	}
	return 0, fmt.Errorf("%w: cannot tell the SQL dialect of driver %T (package %q): pass WithDialect", lease.ErrInvalid, drv, pkg)
}

// tablePattern is what WithTable accepts: an identifier of up to 63
// characters, optionally qualified by a schema (or, on SQLite, an attached
// database name). It is never quoted, so PostgreSQL folds it to lower case.
var tablePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)

func checkTable(table string) error {
	if !tablePattern.MatchString(table) {
		return fmt.Errorf("%w: table name %q is not an identifier (want [schema.]name of letters, digits and _, up to 63 each, not starting with a digit)", lease.ErrInvalid, table)
	}
	return nil
}

func splitTable(table string) (schema, name string) {
	if i := strings.IndexByte(table, '.'); i >= 0 {
		return table[:i], table[i+1:]
	}
	return "", table
}
