// Package sqlcatalog holds what this module's SQL packages need to know
// about a database without importing its driver: which flavour of SQL a
// driver speaks (from its package path), which table names may be put
// into SQL unquoted, and whether a table exists, asked of the catalog.
//
// It imports no driver, so packages that must not link one (fence/sqlfence)
// can use it. backend/sql has its own copies of these functions and could
// use it too.
package sqlcatalog

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path"
	"reflect"
	"regexp"
	"strings"

	"github.com/leasekit/lease"
)

// Flavour is a family of SQL dialects.
type Flavour int

// The flavours.
const (
	Unknown Flavour = iota
	SQLite
	PostgreSQL
	MySQL
)

// FlavourOf names the flavour of drv from the package path of its type:
// modernc.org/sqlite and mattn/go-sqlite3 are SQLite, jackc/pgx and lib/pq
// PostgreSQL, go-sql-driver/mysql MySQL. It returns Unknown, and the
// package path for an error message, for anything else.
func FlavourOf(drv driver.Driver) (Flavour, string) {
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
		return SQLite, pkg
	case strings.Contains(pkg, "pgx"), path.Base(pkg) == "pq", strings.Contains(pkg, "postgres"):
		return PostgreSQL, pkg
	case strings.Contains(pkg, "mysql"):
		return MySQL, pkg
	}
	return Unknown, pkg
}

// tablePattern is what CheckTable accepts: an identifier of up to 63
// characters, optionally qualified by a schema (or, on SQLite, an attached
// database name). It is never quoted, so PostgreSQL folds it to lower case.
var tablePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)

// CheckTable reports whether table is a name that may be put into SQL
// unquoted: [schema.]identifier of letters, digits and '_'. The error
// matches lease.ErrInvalid.
func CheckTable(table string) error {
	if !tablePattern.MatchString(table) {
		return fmt.Errorf("%w: table name %q is not an identifier (want [schema.]name of letters, digits and _, up to 63 each, not starting with a digit)", lease.ErrInvalid, table)
	}
	return nil
}

// SplitTable returns table's schema (empty if unqualified) and name.
func SplitTable(table string) (schema, name string) {
	if i := strings.IndexByte(table, '.'); i >= 0 {
		return table[:i], table[i+1:]
	}
	return "", table
}

// TableExists asks the catalog of db, of flavour f, whether table (which
// CheckTable accepted) exists. It never probes the table with a query that
// would fail (and abort a PostgreSQL transaction).
func TableExists(ctx context.Context, db *sql.DB, f Flavour, table string) (bool, error) {
	schema, name := SplitTable(table)
	var n int
	var err error
	switch f {
	case SQLite:
		master := "sqlite_master"
		if schema != "" {
			master = schema + ".sqlite_master"
		}
		err = db.QueryRowContext(ctx, `SELECT count(*) FROM `+master+` WHERE type = 'table' AND name = ?1 COLLATE NOCASE`, name).Scan(&n)
	case PostgreSQL:
		// to_regclass resolves the name as the statements will (search
		// path, case folding) and returns NULL instead of failing.
		err = db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT to_regclass($1::text) AS r) x WHERE r IS NOT NULL`, table).Scan(&n)
	case MySQL:
		var s any
		if schema != "" {
			s = schema
		}
		err = db.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?`, s, name).Scan(&n)
	default:
		return false, fmt.Errorf("%w: unknown SQL flavour %d", lease.ErrInvalid, int(f))
	}
	return n > 0, err
}
