package sqllease

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/leasekit/lease/internal/testenv"
)

// randomTable returns a table name no earlier run used.
func randomTable() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "lease_test_" + hex.EncodeToString(b[:])
}

// store is one database under test: a URL that Open accepts and a pool
// for New, with a fresh table dropped when the test ends.
type store struct {
	name    string
	dialect Dialect
	url     string // with ?table=...
	table   string
	db      *sql.DB // owned by the test
}

// sqliteStore returns a store on a new SQLite file in t's temp dir.
func sqliteStore(t testing.TB) *store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lease.db")
	table := randomTable()
	s := &store{name: "sqlite", dialect: SQLite, table: table, url: "sqlite://" + path + "?table=" + table}
	dsn, err := sqliteDSN(&url.URL{Path: path}, url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	if s.db, err = sql.Open("sqlite", dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.db.Close() })
	return s
}

// postgresStore returns a store on LEASE_TEST_POSTGRES, or skips.
func postgresStore(t testing.TB) *store {
	t.Helper()
	raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
	return serverStore(t, "postgresql", PostgreSQL, raw)
}

// mysqlStore returns a store on LEASE_TEST_MYSQL, or skips.
func mysqlStore(t testing.TB) *store {
	t.Helper()
	raw := testenv.Lookup(t, "LEASE_TEST_MYSQL")
	return serverStore(t, "mysql", MySQL, raw)
}

func serverStore(t testing.TB, name string, d Dialect, raw string) *store {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("bad test URL: %v", err)
	}
	table := randomTable()
	q := u.Query()
	q.Set("table", table)
	u.RawQuery = q.Encode()
	s := &store{name: name, dialect: d, table: table, url: u.String()}
	// The test's own pool comes from a Locker's Open, so that it has the
	// same driver settings (interpolateParams on MySQL).
	l, err := Open(context.Background(), s.url)
	if err != nil {
		t.Fatalf("Open(%s): %v", raw, err)
	}
	s.db = l.db
	t.Cleanup(func() {
		if _, err := s.db.Exec("DROP TABLE IF EXISTS " + table); err != nil {
			t.Errorf("dropping test table %s: %v", table, err)
		}
		l.Close()
	})
	return s
}

// allStores runs fn once per available dialect as a subtest.
func allStores(t *testing.T, fn func(t *testing.T, s *store)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, sqliteStore(t)) })
	t.Run("postgresql", func(t *testing.T) { fn(t, postgresStore(t)) })
	t.Run("mysql", func(t *testing.T) { fn(t, mysqlStore(t)) })
}

// newLocker returns a Locker on s's pool and table, closed with t.
func (s *store) newLocker(t testing.TB, opts ...Option) *Locker {
	t.Helper()
	l, err := New(s.db, append([]Option{WithTable(s.table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// openLocker returns a Locker with its own pool, closed with t.
func (s *store) openLocker(t testing.TB, opts ...Option) *Locker {
	t.Helper()
	l, err := Open(context.Background(), s.url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
