// Package teststores opens a private place on each kind of store the
// project tests against, for the suites' own tests (election,
// semaphore): a URL for lease.Open whose table, key prefix or file no
// other test or run uses, cleaned up when the test ends. The servers come
// from the LEASE_TEST_* variables (testenv.Lookup: skipped when unset,
// failed under LEASE_TEST_REQUIRE_ALL); SQLite and miniredis are made
// here, and etcd is embedded when LEASE_TEST_ETCD is unset.
package teststores

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // "pgx", to drop the test tables
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
	_ "github.com/leasekit/lease/backend/all" // every scheme, for lease.Open
	"github.com/leasekit/lease/internal/etcdtest"
	"github.com/leasekit/lease/internal/testenv"
)

// EtcdExpiryLag is how long after its ttl an etcd lease may still hold its
// key: the lessor looks for expired leases every 500ms and revokes them
// through a consensus round (backend/etcd measures it).
const EtcdExpiryLag = 750 * time.Millisecond

// Random is label followed by 12 random hex digits: a name, table or
// prefix no other test or run uses.
func Random(label string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return label + hex.EncodeToString(b[:])
}

// OpenURL returns a function that opens u with lease.Open, failing t when
// it cannot.
func OpenURL(u string) func(t testing.TB) lease.Locker {
	return func(t testing.TB) lease.Locker {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := lease.Open(ctx, u)
		if err != nil {
			t.Fatalf("lease.Open: %v", err)
		}
		return l
	}
}

// SQLite is a SQLite file named file in t's temp dir, made (in WAL mode,
// with its table) before it is returned: concurrent first opens of a new
// file can fail with SQLITE_BUSY despite busy_timeout (1 of 320 opens by
// 16 goroutines under -race; none once the file exists), a limit of
// backend/sql/sqlite's Open that the suites are not about.
func SQLite(t testing.TB, file string) string {
	u := (&url.URL{Scheme: "sqlite", Path: filepath.ToSlash(filepath.Join(t.TempDir(), file))}).String()
	first := OpenURL(u)(t)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	return u
}

// Postgres is LEASE_TEST_POSTGRES with a fresh table, named label and a
// random part, dropped when t ends.
func Postgres(t testing.TB, label string) string {
	raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
	table := Random(label + "_")
	dropTable(t, "pgx", raw, table)
	return withQuery(t, raw, "table", table)
}

// MySQL is LEASE_TEST_MYSQL with a fresh table, named label and a random
// part, dropped when t ends.
func MySQL(t testing.TB, label string) string {
	raw := testenv.Lookup(t, "LEASE_TEST_MYSQL")
	table := Random(label + "_")
	dropTable(t, "mysql", mysqlDSN(t, raw), table)
	return withQuery(t, raw, "table", table)
}

// Miniredis is a miniredis whose TTLs run on the wall clock (ClockTTL),
// so that leases expire as on a server; it stops when t ends.
func Miniredis(t testing.TB) string {
	mr := miniredis.RunT(t)
	mr.ClockTTL(true)
	return "redis://" + mr.Addr() + "/0"
}

// Redis is LEASE_TEST_REDIS under a fresh key prefix, named label and a
// random part, whose keys are deleted when t ends.
func Redis(t testing.TB, label string) string {
	raw := testenv.Lookup(t, "LEASE_TEST_REDIS")
	prefix := Random("leasetest:"+label+":") + ":"
	deleteRedisKeys(t, raw, prefix)
	return withQuery(t, raw, "prefix", prefix)
}

// Etcd is LEASE_TEST_ETCD, or an embedded server when it is unset, under
// a fresh key prefix, named label and a random part, deleted when t ends.
// etcd leases last whole seconds, and expire up to EtcdExpiryLag late.
func Etcd(t testing.TB, label string) string {
	eps := etcdtest.Endpoints(t)
	prefix := Random(label+"/") + "/"
	deleteEtcdPrefix(t, eps, prefix)
	return "etcd://" + strings.Join(eps, ",") + "?prefix=" + url.QueryEscape(prefix)
}

// withQuery adds key=value to the URL raw.
func withQuery(t testing.TB, raw, key, value string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("bad test URL %q: %v", raw, err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// dropTable drops table through a database/sql pool of driver on dsn when
// t ends.
func dropTable(t testing.TB, driver, dsn, table string) {
	t.Cleanup(func() {
		db, err := sql.Open(driver, dsn)
		if err != nil {
			t.Errorf("drop table %s: %v", table, err)
			return
		}
		defer db.Close()
		if _, err := db.Exec("DROP TABLE IF EXISTS " + table); err != nil {
			t.Errorf("drop table %s: %v", table, err)
		}
	})
}

// mysqlDSN turns mysql://user:pass@host:port/db into a go-sql-driver DSN.
func mysqlDSN(t testing.TB, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("LEASE_TEST_MYSQL=%q: %v", raw, err)
	}
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr = "tcp", u.Host
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		cfg.Addr = net.JoinHostPort(u.Host, "3306")
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	return cfg.FormatDSN()
}

// deleteRedisKeys deletes every key under prefix when t ends.
func deleteRedisKeys(t testing.TB, raw, prefix string) {
	t.Cleanup(func() {
		opts, err := redis.ParseURL(raw)
		if err != nil {
			t.Errorf("LEASE_TEST_REDIS=%q: %v", raw, err)
			return
		}
		c := redis.NewClient(opts)
		defer c.Close()
		ctx := context.Background()
		var keys []string
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("scan keys under %q: %v", prefix, err)
			return
		}
		if len(keys) > 0 {
			if err := c.Unlink(ctx, keys...).Err(); err != nil {
				t.Errorf("delete keys under %q: %v", prefix, err)
			}
		}
	})
}

// deleteEtcdPrefix deletes every key under prefix when t ends.
func deleteEtcdPrefix(t testing.TB, endpoints []string, prefix string) {
	t.Cleanup(func() {
		c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Errorf("etcd client: %v", err)
			return
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
			t.Errorf("delete keys under %q: %v", prefix, err)
		}
	})
}
