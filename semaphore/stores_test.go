package semaphore_test

import (
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/internal/teststores"
	"github.com/leasekit/lease/semaphore/semaphoretest"
)

// The stores under test (internal/teststores opens each).

// storeTTL is the holders' ttl on the servers: long enough that a renewal
// every third of it lands on a loaded 2-CPU machine under -race (as in
// election's suite), short enough that the crash case waits a second.
// etcd's shortest lease is a second too.
const storeTTL = time.Second

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
func sqliteHarness(t testing.TB) semaphoretest.Harness {
	u := teststores.SQLite(t, "semaphore.db")
	// Every write to the file, a standby's busy Acquire included, takes
	// its one write lock, and SQLite's busy handler sleeps up to 100ms
	// between tries: a renewal queued behind four candidates and three
	// processes missed a 1s ttl's Deadline at a load average of 15.
	return semaphoretest.Harness{New: teststores.OpenURL(u), TTL: 2 * storeTTL}
}

// postgresHarness: LEASE_TEST_POSTGRES, in a fresh table.
func postgresHarness(t testing.TB) semaphoretest.Harness {
	u := teststores.Postgres(t, "semaphore_test")
	return semaphoretest.Harness{New: teststores.OpenURL(u), TTL: storeTTL}
}

// mysqlHarness: LEASE_TEST_MYSQL, in a fresh table.
func mysqlHarness(t testing.TB) semaphoretest.Harness {
	u := teststores.MySQL(t, "semaphore_test")
	return semaphoretest.Harness{New: teststores.OpenURL(u), TTL: storeTTL}
}

// miniredisHarness: a miniredis whose TTLs run on the wall clock.
func miniredisHarness(t testing.TB) semaphoretest.Harness {
	u := teststores.Miniredis(t)
	return semaphoretest.Harness{New: teststores.OpenURL(u), TTL: storeTTL}
}

// redisHarness: LEASE_TEST_REDIS, under a fresh key prefix.
func redisHarness(t testing.TB) semaphoretest.Harness {
	u := teststores.Redis(t, "semaphore")
	return semaphoretest.Harness{New: teststores.OpenURL(u), TTL: storeTTL}
}

// etcdHarness: LEASE_TEST_ETCD, or an embedded server, under a fresh key
// prefix. etcd leases last whole seconds.
func etcdHarness(t testing.TB) semaphoretest.Harness {
	u := teststores.Etcd(t, "semaphoretest")
	return semaphoretest.Harness{New: teststores.OpenURL(u), TTL: storeTTL, ExpiryLag: teststores.EtcdExpiryLag}
}
