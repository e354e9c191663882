package sqllease

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/leasekit/lease"
)

// TestDialectDetection checks that New recognises the drivers by the
// package of their type, without importing them.
func TestDialectDetection(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	if d := s.newLocker(t).Dialect(); d != SQLite {
		t.Errorf("SQLite pool detected as %v", d)
	}
	for _, st := range []func(testing.TB) *testStore{postgresStore, mysqlStore} {
		t.Run("", func(t *testing.T) {
			s := st(t)
			if d := s.newLocker(t).Dialect(); d != s.dialect {
				t.Errorf("%s pool detected as %v", s.name, d)
			}
		})
	}
	for path, want := range map[string]Dialect{
		"modernc.org/sqlite":                    SQLite,
		"github.com/mattn/go-sqlite3":           SQLite,
		"github.com/ncruces/go-sqlite3/driver":  SQLite,
		"github.com/jackc/pgx/v5/stdlib":        PostgreSQL,
		"github.com/jackc/pgx/v4/stdlib":        PostgreSQL,
		"github.com/lib/pq":                     PostgreSQL,
		"github.com/go-sql-driver/mysql":        MySQL,
		"example.com/wrap/postgres":             PostgreSQL,
		"example.com/mariadb":                   MySQL,
		"example.com/sqlite3":                   SQLite,
		"github.com/leasekit/lease/backend/sql": 0,
		"example.com/pqueue":                    0, // not "pq"
		"example.com/sqlite-to-mysql":           0, // two answers: ask
		"":                                      0,
	} {
		if got := dialectOfPackage(path); got != want {
			t.Errorf("dialectOfPackage(%q) = %v, want %v", path, got, want)
		}
	}
	if !mariaDBReturning("10.11.19-MariaDB-0+deb12u1") || mariaDBReturning("10.4.3-MariaDB") || mariaDBReturning("8.0.36") || !mariaDBReturning("11.4.2-MariaDB") {
		t.Error("mariaDBReturning misreads versions")
	}
}

// TestUnknownDriver checks that a driver New cannot place is an error
// matching ErrInvalid that points at WithDialect, and that WithDialect
// then works.
func TestUnknownDriver(t *testing.T) {
	t.Parallel()
	db := sql.OpenDB(noConnector{})
	defer db.Close()
	_, err := New(db)
	if !errors.Is(err, lease.ErrInvalid) || !contains(err, "WithDialect") {
		t.Fatalf("New on an unknown driver: %v, want ErrInvalid naming WithDialect", err)
	}
	if _, err := New(db, WithDialect(PostgreSQL)); err != nil {
		t.Fatalf("New with WithDialect: %v", err)
	}
	if _, err := New(nil); !errors.Is(err, lease.ErrInvalid) || !contains(err, "lease/sql: New: ") {
		t.Fatalf("New(nil): %v, want ErrInvalid prefixed lease/sql: New:", err)
	}
	if _, err := New(db, WithDialect(PostgreSQL), nil); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("New with a nil Option: %v, want ErrInvalid", err)
	}
}
