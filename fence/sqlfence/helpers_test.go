package sqlfence_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"
	_ "modernc.org/sqlite"             // "sqlite"

	"github.com/leasekit/lease/fence/sqlfence"
	"github.com/leasekit/lease/internal/testenv"
)

// randomTable returns a table name no earlier run used.
func randomTable(label string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "fence_test_" + label + "_" + hex.EncodeToString(b[:])
}

// store is one database under test: how to open a new pool on it, and a
// fresh fence table and data table, dropped when the test ends.
type store struct {
	name    string
	dialect sqlfence.Dialect
	driver  string
	dsn     string
	fences  string // fence table
	data    string // data table: k -> v

	mu    sync.Mutex
	pools []*sql.DB // every pool opened, for a SQLite "restart"
}

// sqliteStore returns a store on a new SQLite file in t's temp dir.
func sqliteStore(t testing.TB) *store {
	path := filepath.Join(t.TempDir(), "fence.db")
	return newStore(t, "sqlite", sqlfence.SQLite, "sqlite", sqliteDSN(path))
}

// sqliteDSN is a file with WAL, so that readers do not wait for writers,
// and a busy timeout, so that writers queue instead of failing.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
}

// postgresStore returns a store on LEASE_TEST_POSTGRES, or skips.
func postgresStore(t testing.TB) *store {
	raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
	return newStore(t, "postgresql", sqlfence.PostgreSQL, "pgx", raw)
}

// mysqlStore returns a store on LEASE_TEST_MYSQL, or skips.
func mysqlStore(t testing.TB) *store {
	return newStore(t, "mysql", sqlfence.MySQL, "mysql", mysqlDSN(t, testenvMySQL(t), nil))
}

func testenvMySQL(t testing.TB) string { return testenv.Lookup(t, "LEASE_TEST_MYSQL") }

// mysqlDSN turns mysql://user:pass@host:port/db into a go-sql-driver DSN
// with interpolateParams on (one round trip per statement), plus params.
func mysqlDSN(t testing.TB, raw string, params map[string]string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("LEASE_TEST_MYSQL=%q: %v", raw, err)
	}
	cfg := mysql.NewConfig()
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, strings.TrimPrefix(u.Path, "/")
	cfg.InterpolateParams = true
	cfg.Params = params
	return cfg.FormatDSN()
}

func newStore(t testing.TB, name string, d sqlfence.Dialect, driver, dsn string) *store {
	t.Helper()
	s := &store{name: name, dialect: d, driver: driver, dsn: dsn, fences: randomTable("fences"), data: randomTable("data")}
	db := s.open(t)
	ddl := map[sqlfence.Dialect]string{
		sqlfence.SQLite:     `CREATE TABLE %s (k TEXT PRIMARY KEY, v TEXT NOT NULL)`,
		sqlfence.PostgreSQL: `CREATE TABLE %s (k TEXT PRIMARY KEY, v TEXT NOT NULL)`,
		sqlfence.MySQL:      `CREATE TABLE %s (k VARCHAR(255) PRIMARY KEY, v TEXT NOT NULL) ENGINE=InnoDB`,
	}[d]
	if _, err := db.Exec(fmt.Sprintf(ddl, s.data)); err != nil {
		t.Fatalf("%s: creating the data table: %v", name, err)
	}
	t.Cleanup(func() {
		if d == sqlfence.SQLite {
			return // the file goes with the temp dir
		}
		db, err := sql.Open(driver, dsn)
		if err != nil {
			return
		}
		defer db.Close()
		for _, table := range []string{s.fences, s.data} {
			if _, err := db.Exec("DROP TABLE IF EXISTS " + table); err != nil {
				t.Errorf("dropping test table %s: %v", table, err)
			}
		}
	})
	return s
}

// open returns a new pool on the store, closed when t ends.
func (s *store) open(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open(s.driver, s.dsn)
	if err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	t.Cleanup(func() { db.Close() })
	s.mu.Lock()
	s.pools = append(s.pools, db)
	s.mu.Unlock()
	return db
}

// closeAll closes every pool opened so far: with SQLite, nothing of the
// database stays in any process's memory, as after a restart.
func (s *store) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, db := range s.pools {
		db.Close()
	}
	s.pools = nil
}

// fence returns a Fence on a new pool, creating the fence table if needed.
func (s *store) fence(t testing.TB, opts ...sqlfence.Option) (*sqlfence.Fence, *sql.DB) {
	t.Helper()
	db := s.open(t)
	f, err := sqlfence.New(context.Background(), db, append([]sqlfence.Option{sqlfence.WithTable(s.fences)}, opts...)...)
	if err != nil {
		t.Fatalf("%s: New: %v", s.name, err)
	}
	return f, db
}

// upsert is the data write of the dialect: set k to v.
func (s *store) upsert() string {
	switch s.dialect {
	case sqlfence.MySQL:
		return `INSERT INTO ` + s.data + ` (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v)`
	case sqlfence.PostgreSQL:
		return `INSERT INTO ` + s.data + ` (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v`
	}
	return `INSERT INTO ` + s.data + ` (k, v) VALUES (?1, ?2) ON CONFLICT (k) DO UPDATE SET v = excluded.v`
}

// read is the data read of the dialect.
func (s *store) read() string {
	if s.dialect == sqlfence.PostgreSQL {
		return `SELECT v FROM ` + s.data + ` WHERE k = $1`
	}
	return `SELECT v FROM ` + s.data + ` WHERE k = ?`
}

// allStores runs fn once per dialect as a subtest.
func allStores(t *testing.T, fn func(t *testing.T, s *store)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, sqliteStore(t)) })
	t.Run("postgresql", func(t *testing.T) { fn(t, postgresStore(t)) })
	t.Run("mysql", func(t *testing.T) { fn(t, mysqlStore(t)) })
}
