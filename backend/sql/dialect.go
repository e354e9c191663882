package sqllease

import (
	"database/sql"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/leasekit/lease"
)

// Dialect is the SQL flavour a Locker speaks.
type Dialect int

// The supported dialects. The zero Dialect means "detect it from the
// *sql.DB's driver".
const (
	// SQLite is SQLite 3.42 or later (for unixepoch('subsec')), as
	// modernc.org/sqlite bundles.
	SQLite Dialect = iota + 1
	// PostgreSQL is PostgreSQL 12 or later, through any driver (pgx's
	// database/sql driver and lib/pq are detected). CockroachDB should
	// work through it but is untested.
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

// knownDrivers are the database/sql drivers whose dialect New knows, by
// the import path of the driver's type. The driver is recognised by
// reflection, so that this package imports none of them.
var knownDrivers = []struct {
	path    string // a package path, or the module path it starts with
	dialect Dialect
}{
	{"modernc.org/sqlite", SQLite},
	{"github.com/mattn/go-sqlite3", SQLite},
	{"github.com/ncruces/go-sqlite3", SQLite},
	{"github.com/jackc/pgx", PostgreSQL}, // v4 and v5 stdlib
	{"github.com/lib/pq", PostgreSQL},
	{"github.com/go-sql-driver/mysql", MySQL},
}

// detectDialect names the dialect of db's driver from the package path of
// the driver's type, or fails with a hint to use WithDialect.
func detectDialect(db *sql.DB) (Dialect, error) {
	drv := db.Driver()
	t := reflect.TypeOf(drv)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	path := ""
	if t != nil {
		path = t.PkgPath()
	}
	if d := dialectOfPackage(path); d != 0 {
		return d, nil
	}
	return 0, fmt.Errorf("%w: cannot tell the SQL dialect of driver %T (package %q): pass WithDialect", lease.ErrInvalid, drv, path)
}

// dialectOfPackage is the dialect of a driver whose type is declared in the
// package path, or 0. Besides the known drivers it accepts a path with one
// element naming exactly one database (a driver wrapper such as
// ".../sqlite3", ".../postgres" or ".../mysql"); anything else is left to
// WithDialect rather than guessed.
func dialectOfPackage(path string) Dialect {
	for _, k := range knownDrivers {
		if path == k.path || strings.HasPrefix(path, k.path+"/") {
			return k.dialect
		}
	}
	found := Dialect(0)
	for _, elem := range strings.Split(strings.ToLower(path), "/") {
		for _, c := range []struct {
			d     Dialect
			match bool
		}{
			{SQLite, strings.Contains(elem, "sqlite")},
			{PostgreSQL, strings.Contains(elem, "postgres") || elem == "pq" || elem == "pgx"},
			{MySQL, strings.Contains(elem, "mysql") || strings.Contains(elem, "mariadb")},
		} {
			if !c.match {
				continue
			}
			if found != 0 && found != c.d {
				return 0
			}
			found = c.d
		}
	}
	return found
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

// pgTempSchema matches PostgreSQL's temporary schemas: pg_temp, the alias
// of the session's own, and pg_temp_N, each session's by number. Unquoted
// names fold to lower case, so PG_TEMP is the same schema.
var pgTempSchema = regexp.MustCompile(`(?i)^pg_temp(_[0-9]+)?$`)

// checkPermanent refuses a table named in a schema that each connection
// has its own copy of: leases kept there would be seen by one pooled
// connection only, so two Lockers (or two connections of one pool) would
// both grant the same name. The catalog lookup refuses temporary tables
// that the name does not give away (setup in store.go). The error matches
// lease.ErrInvalid.
func checkPermanent(d Dialect, table string) error {
	schema, _ := splitTable(table)
	switch {
	case d == SQLite && strings.EqualFold(schema, "temp"):
		return fmt.Errorf("%w: table %s is in SQLite's temp schema, which each connection has its own copy of: Lockers on other connections would not see its leases (use main. or no schema)", lease.ErrInvalid, table)
	case d == PostgreSQL && pgTempSchema.MatchString(schema):
		return fmt.Errorf("%w: table %s is in PostgreSQL's temporary schema %s, which each session has its own copy of: Lockers on other connections would not see its leases (use a permanent schema)", lease.ErrInvalid, table, schema)
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
