package sqllease

import (
	"context"
	"crypto/rand"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"

	"github.com/leasekit/lease/internal/testenv"
)

// This package imports no driver; its tests do, to make pools the way the
// dialect packages' Open functions do (those are tested in their own
// packages, which import this one).

// randomTable returns a table name no earlier run used.
func randomTable() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "lease_test_" + hex.EncodeToString(b[:])
}

// testStore is one database under test: a connector for more pools and a
// pool for New, with a fresh table dropped when the test ends.
type testStore struct {
	name      string
	dialect   Dialect
	table     string
	connector sqldriver.Connector
	db        *sql.DB // owned by the test
	// listener, on PostgreSQL, is given to every Locker of the store
	// (WithListener), as backend/sql/postgres's Open does.
	listener *testListener
}

// sqliteStore returns a store on a new SQLite file in t's temp dir.
func sqliteStore(t testing.TB) *testStore {
	t.Helper()
	return sqliteFileStore(t, filepath.Join(t.TempDir(), "lease.db"))
}

func sqliteFileStore(t testing.TB, path string) *testStore {
	t.Helper()
	c, err := sqlite.NewConnector(sqliteDSN(path))
	if err != nil {
		t.Fatal(err)
	}
	s := &testStore{name: "sqlite", dialect: SQLite, table: randomTable(), connector: c, db: sql.OpenDB(c)}
	t.Cleanup(func() { s.db.Close() })
	return s
}

// sqliteDSN is the DSN backend/sql/sqlite's Open uses for a file.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
}

// postgresStore returns a store on LEASE_TEST_POSTGRES, or skips.
func postgresStore(t testing.TB) *testStore {
	t.Helper()
	raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
	s := serverStore(t, PostgreSQL, postgresConnector(t, raw, nil))
	s.listener = newTestListener(t, raw)
	return s
}

// mysqlStore returns a store on LEASE_TEST_MYSQL, or skips.
func mysqlStore(t testing.TB) *testStore {
	t.Helper()
	return serverStore(t, MySQL, mysqlConnector(t, mysqlConfig(t, testenv.Lookup(t, "LEASE_TEST_MYSQL"))))
}

// postgresConnector is a pgx connector for a postgres:// URL, with extra
// run-time parameters.
func postgresConnector(t testing.TB, raw string, params map[string]string) sqldriver.Connector {
	t.Helper()
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		t.Fatalf("bad test URL: %v", err)
	}
	for k, v := range params {
		cfg.RuntimeParams[k] = v
	}
	return stdlib.GetConnector(*cfg)
}

// mysqlConfig is the go-sql-driver configuration backend/sql/mysql's Open
// makes of a mysql:// URL: interpolateParams on, no logging.
func mysqlConfig(t testing.TB, raw string) *mysql.Config {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("bad test URL: %v", err)
	}
	cfg := mysql.NewConfig()
	cfg.Logger = &mysql.NopLogger{}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr = "tcp", u.Host
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		cfg.Addr = net.JoinHostPort(u.Host, "3306")
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	cfg.InterpolateParams = true
	return cfg
}

func mysqlConnector(t testing.TB, cfg *mysql.Config) sqldriver.Connector {
	t.Helper()
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func serverStore(t testing.TB, d Dialect, c sqldriver.Connector) *testStore {
	t.Helper()
	s := &testStore{name: d.String(), dialect: d, table: randomTable(), connector: c, db: sql.OpenDB(c)}
	s.db.SetMaxIdleConns(16)
	t.Cleanup(func() {
		if err := dropTable(s.db, d, s.table); err != nil {
			t.Errorf("dropping test table %s: %v", s.table, err)
		}
		s.db.Close()
	})
	return s
}

// dropTable drops table and, on PostgreSQL, its marks table.
func dropTable(db *sql.DB, d Dialect, table string) error {
	if _, err := db.Exec("DROP TABLE IF EXISTS " + table); err != nil {
		return err
	}
	if d == PostgreSQL {
		_, err := db.Exec("DROP TABLE IF EXISTS " + marksTable(table))
		return err
	}
	return nil
}

// allStores runs fn once per available dialect as a subtest. The
// subtests run in parallel: each has a store of its own (a file, a
// table).
func allStores(t *testing.T, fn func(t *testing.T, s *testStore)) {
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); fn(t, sqliteStore(t)) })
	t.Run("postgresql", func(t *testing.T) { t.Parallel(); fn(t, postgresStore(t)) })
	t.Run("mysql", func(t *testing.T) { t.Parallel(); fn(t, mysqlStore(t)) })
}

// newLocker returns a Locker on s's pool and table, closed with t.
func (s *testStore) newLocker(t testing.TB, opts ...Option) *Locker {
	t.Helper()
	l, err := New(s.db, append(s.baseOptions(), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// openLocker returns a Locker with its own pool, as the dialect packages'
// Open make, closed with t.
func (s *testStore) openLocker(t testing.TB, opts ...Option) *Locker {
	t.Helper()
	l, err := OpenConnector(context.Background(), s.connector, append(s.baseOptions(), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// baseOptions are the options of every Locker of s: its table and, on
// PostgreSQL, its Listener.
func (s *testStore) baseOptions() []Option {
	opts := []Option{WithTable(s.table)}
	if s.listener != nil {
		opts = append(opts, WithListener(s.listener))
	}
	return opts
}

// nowExpr returns SQL for the database's clock in epoch milliseconds.
func nowSQL(d Dialect) string { return fmt.Sprintf("SELECT %s", nowExpr[d]) }

// contains reports whether err's text contains s.
func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }
