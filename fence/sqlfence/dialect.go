package sqlfence

import (
	"database/sql"
	"fmt"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/sqlcatalog"
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
	switch f, pkg := sqlcatalog.FlavourOf(drv); f {
	case sqlcatalog.SQLite:
		return SQLite, nil
	case sqlcatalog.PostgreSQL:
		return PostgreSQL, nil
	case sqlcatalog.MySQL:
		return MySQL, nil
	default:
		return 0, fmt.Errorf("%w: cannot tell the SQL dialect of driver %T (package %q): pass WithDialect", lease.ErrInvalid, drv, pkg)
	}
}

// flavour is d's family for package sqlcatalog.
func (d Dialect) flavour() sqlcatalog.Flavour {
	switch d {
	case SQLite:
		return sqlcatalog.SQLite
	case PostgreSQL:
		return sqlcatalog.PostgreSQL
	case MySQL:
		return sqlcatalog.MySQL
	}
	return sqlcatalog.Unknown
}
