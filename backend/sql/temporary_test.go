package sqllease

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/leasekit/lease"
)

// Issue 9, defect 4: a temporary table belongs to one connection, so
// Lockers on other connections would not see its leases. These tests
// fail if two owners can both hold one name.

// tempStores are the dialects whose catalog shows temporary tables to the
// connection that made them (MySQL's and MariaDB's before 11.2 do not:
// see the package documentation).
// The subtests run in parallel, each on a store of its own.
func tempStores(t *testing.T, fn func(t *testing.T, s *testStore)) {
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); fn(t, sqliteStore(t)) })
	t.Run("postgresql", func(t *testing.T) { t.Parallel(); fn(t, postgresStore(t)) })
}

// createTemp creates a temporary table named like s's on db's one
// connection, with the lease table's columns.
func createTemp(t *testing.T, s *testStore, exec func(string) error) {
	t.Helper()
	stmts, err := schemaStatements(s.dialect, s.table)
	if err != nil {
		t.Fatal(err)
	}
	ddl := strings.Replace(stmts[0], "CREATE TABLE", "CREATE TEMPORARY TABLE", 1)
	ddl = strings.TrimSuffix(ddl, " WITHOUT ROWID")
	if err := exec(ddl); err != nil {
		t.Fatalf("creating the temporary table: %v", err)
	}
	// Before the store's cleanup, whose unqualified DROP would find the
	// temporary table first and leave the real one behind.
	temp := map[Dialect]string{SQLite: "temp.", PostgreSQL: "pg_temp."}[s.dialect] + s.table
	t.Cleanup(func() {
		if err := exec("DROP TABLE " + temp); err != nil {
			t.Errorf("dropping %s: %v", temp, err)
		}
	})
}

// TestTemporarySchemaRefused checks that New and Schema refuse a table
// named in a temporary schema, before sending anything.
func TestTemporarySchemaRefused(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	for d, tables := range map[Dialect][]string{
		SQLite:     {"temp.x", "TEMP.x", "Temp.leases"},
		PostgreSQL: {"pg_temp.x", "PG_TEMP.x", "pg_temp_3.x", "pg_temp_12.leases"},
	} {
		for _, table := range tables {
			_, err := New(s.db, WithDialect(d), WithTable(table))
			if !errors.Is(err, lease.ErrInvalid) || !contains(err, "temp") {
				t.Errorf("%v: New(WithTable(%q)): %v, want ErrInvalid naming the temporary schema", d, table, err)
			}
			if _, err := Schema(d, table); !errors.Is(err, lease.ErrInvalid) {
				t.Errorf("%v: Schema(%q): %v, want ErrInvalid", d, table, err)
			}
		}
	}
	// Schemas that only look alike are fine.
	for d, table := range map[Dialect]string{SQLite: "main.x", PostgreSQL: "pg_temporary.x", MySQL: "temp.x"} {
		if _, err := New(s.db, WithDialect(d), WithTable(table)); err != nil {
			t.Errorf("%v: New(WithTable(%q)): %v", d, table, err)
		}
	}
}

// TestTemporaryTableRefused gives one Locker a pool of one connection on
// which a temporary table has the lease table's name, and another Locker
// its own pool: they must not both acquire one name, and the first must
// be refused with ErrInvalid saying the table is temporary.
func TestTemporaryTableRefused(t *testing.T) {
	t.Parallel()
	tempStores(t, func(t *testing.T, s *testStore) {
		s.db.SetMaxOpenConns(1)
		createTemp(t, s, func(ddl string) error { _, err := s.db.Exec(ddl); return err })
		onTemp := s.newLocker(t)
		other := s.openLocker(t)
		ctx := context.Background()
		_, errTemp := onTemp.Acquire(ctx, "job", "a", time.Minute)
		_, errOther := other.Acquire(ctx, "job", "b", time.Minute)
		if errTemp == nil && errOther == nil {
			t.Fatal("two owners both acquired one name: one on the temporary table, one on the real one")
		}
		if !errors.Is(errTemp, lease.ErrInvalid) || !contains(errTemp, "temporary") {
			t.Errorf("Acquire on the temporary table: %v, want ErrInvalid saying it is temporary", errTemp)
		}
		if errOther != nil {
			t.Errorf("Acquire on the real table: %v", errOther)
		}
	})
}

// TestLaterTemporaryTableCannotShadow sets a Locker up on the real table,
// then creates a temporary table of the same name on its pool's one
// connection: its statements must still reach the real table, which they
// name with its schema.
func TestLaterTemporaryTableCannotShadow(t *testing.T) {
	t.Parallel()
	tempStores(t, func(t *testing.T, s *testStore) {
		s.db.SetMaxOpenConns(1)
		l := s.newLocker(t)
		ctx := context.Background()
		held, err := l.Acquire(ctx, "job", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		createTemp(t, s, func(ddl string) error { _, err := s.db.Exec(ddl); return err })
		if got, err := l.Inspect(ctx, "job"); err != nil || got.Token != held.Token {
			t.Fatalf("Inspect after a temporary table of the same name appeared: %v, %v; want the tenure on the real table", got, err)
		}
		if _, err := s.openLocker(t).Acquire(ctx, "job", "b", time.Minute); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("another Locker's Acquire: %v, want ErrHeld", err)
		}
		if err := l.Release(ctx, held); err != nil {
			t.Fatalf("Release: %v", err)
		}
	})
}

// TestOpenWaitsOutABusySQLiteFile: a SQLite file locked by another
// connection makes a new connection's journal_mode(WAL) pragma fail with
// SQLITE_BUSY, even with no busy timeout to wait in; OpenConnector tries
// again, within its context, instead of failing the open (a flake of the
// conformance suite on a loaded machine).
func TestOpenWaitsOutABusySQLiteFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "busy.db")
	holder, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	holder.SetMaxOpenConns(1)
	ctx := context.Background()
	tx, err := holder.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "CREATE TABLE hold (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	// An exclusive lock on a file in rollback-journal mode: a new
	// connection cannot switch it to WAL until it is let go.
	if _, err := tx.ExecContext(ctx, "PRAGMA locking_mode=EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO hold VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	c, err := sqlite.NewConnector("file:" + path + "?_pragma=busy_timeout(0)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(30*time.Millisecond, func() { _ = tx.Rollback(); _ = holder.Close() })
	open, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := OpenConnector(open, c, WithTable(randomTable()))
	if err != nil {
		t.Fatalf("OpenConnector on a SQLite file locked for 30ms: %v", err)
	}
	l.Close()
}
