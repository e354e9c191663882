package semaphore_test

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
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/internal/etcdtest"
	"github.com/leasekit/lease/internal/testenv"
	"github.com/leasekit/lease/semaphore/semaphoretest"
)

// A store under test: how its harness opens Lockers. (Modelled on
// election/stores_test.go; the suite has no cross-process cases, so no URL.)

// storeTTL is the holders' ttl on the servers: long enough that a renewal
// every third of it lands on a loaded 2-CPU machine under -race (as in
// election's suite), short enough that the crash case waits a second.
// etcd's shortest lease is a second too.
const storeTTL = time.Second

// etcdExpiryLag is how long after its ttl an etcd lease may still hold its
// key: the lessor looks for expired leases every 500ms and revokes them
// through a consensus round (backend/etcd measures it).
const etcdExpiryLag = 750 * time.Millisecond

func random(label string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return label + hex.EncodeToString(b[:])
}

// openURL returns a Harness.New that opens u with lease.Open.
func openURL(u string) func(t testing.TB) lease.Locker {
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

// memoryHarness: every Locker is a handle on one memory store (Share), as
// separate connections to one server would be; closing one leaves the
// store to the others, as a crashed process would. Memory answers at
// once, so a short ttl keeps the suite quick.
func memoryHarness(t testing.TB) semaphoretest.Harness {
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	return semaphoretest.Harness{
		New: func(testing.TB) lease.Locker { return store.Share() },
		TTL: 300 * time.Millisecond,
	}
}

// sqliteHarness: a SQLite file in t's temp dir, each Locker its own pool.
// The file is made (in WAL mode, with its table) before the suite opens it
// from many goroutines and processes at once: concurrent first opens of a
// new file can fail with SQLITE_BUSY despite busy_timeout (1 of 320 opens
// by 16 goroutines under -race; none once the file exists), a limit of
// backend/sql/sqlite's Open that the suite is not about.
func sqliteHarness(t testing.TB) semaphoretest.Harness {
	u := (&url.URL{Scheme: "sqlite", Path: filepath.ToSlash(filepath.Join(t.TempDir(), "semaphore.db"))}).String()
	first := openURL(u)(t)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// Every write to the file, a standby's busy Acquire included, takes
	// its one write lock, and SQLite's busy handler sleeps up to 100ms
	// between tries: a renewal queued behind four candidates and three
	// processes missed a 1s ttl's Deadline at a load average of 15.
	return semaphoretest.Harness{New: openURL(u), TTL: 2 * storeTTL}
}

// postgresHarness: LEASE_TEST_POSTGRES (skipped, or failed in CI, when
// unset), in a fresh table dropped when t ends.
func postgresHarness(t testing.TB) semaphoretest.Harness {
	raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
	table := random("semaphore_test_")
	dropTable(t, "pgx", raw, table)
	u := withQuery(t, raw, "table", table)
	return semaphoretest.Harness{New: openURL(u), TTL: storeTTL}
}

// mysqlHarness: LEASE_TEST_MYSQL (skipped, or failed in CI, when unset),
// in a fresh table dropped when t ends.
func mysqlHarness(t testing.TB) semaphoretest.Harness {
	raw := testenv.Lookup(t, "LEASE_TEST_MYSQL")
	table := random("semaphore_test_")
	dropTable(t, "mysql", mysqlDSN(t, raw), table)
	u := withQuery(t, raw, "table", table)
	return semaphoretest.Harness{New: openURL(u), TTL: storeTTL}
}

// miniredisHarness: a miniredis whose TTLs run on the wall clock
// (ClockTTL), so that leases expire as on a server.
func miniredisHarness(t testing.TB) semaphoretest.Harness {
	mr := miniredis.RunT(t)
	mr.ClockTTL(true)
	u := "redis://" + mr.Addr() + "/0"
	return semaphoretest.Harness{New: openURL(u), TTL: storeTTL}
}

// redisHarness: LEASE_TEST_REDIS (skipped, or failed in CI, when unset),
// under a fresh key prefix whose keys are deleted when t ends.
func redisHarness(t testing.TB) semaphoretest.Harness {
	raw := testenv.Lookup(t, "LEASE_TEST_REDIS")
	prefix := random("leasetest:semaphore:") + ":"
	deleteRedisKeys(t, raw, prefix)
	u := withQuery(t, raw, "prefix", prefix)
	return semaphoretest.Harness{New: openURL(u), TTL: storeTTL}
}

// etcdHarness: LEASE_TEST_ETCD, or an embedded server when it is unset,
// under a fresh key prefix deleted when t ends. etcd leases last whole
// seconds.
func etcdHarness(t testing.TB) semaphoretest.Harness {
	eps := etcdtest.Endpoints(t)
	prefix := random("semaphoretest/") + "/"
	deleteEtcdPrefix(t, eps, prefix)
	u := "etcd://" + strings.Join(eps, ",") + "?prefix=" + url.QueryEscape(prefix)
	return semaphoretest.Harness{New: openURL(u), TTL: storeTTL, ExpiryLag: etcdExpiryLag}
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
