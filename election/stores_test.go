package election_test

import (
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/election/electiontest"
	"github.com/leasekit/lease/internal/teststores"
)

// The stores under test (internal/teststores opens each).

// storeTTL is the candidates' ttl on every store: long enough that a
// renewal every third of it lands on a loaded 2-CPU machine under -race
// (with 500ms, miniredis, served from this busy test process while three
// candidate processes started, let renewals miss their Deadline at a load
// average of 15), short enough that the crash cases wait a second. etcd's
// shortest lease is a second too.
const storeTTL = time.Second

// memoryHarness: every Locker is a handle on one memory store (Share), as
// separate connections to one server would be; closing one leaves the
// store to the others, as a crashed process would.
func memoryHarness(t testing.TB) electiontest.Harness {
	store := memory.New()
	t.Cleanup(func() { _ = store.Close() })
	return electiontest.Harness{
		New: func(testing.TB) lease.Locker { return store.Share() },
		TTL: storeTTL,
	}
}

// sqliteHarness: a SQLite file in t's temp dir, each Locker its own pool.
func sqliteHarness(t testing.TB) electiontest.Harness {
	u := teststores.SQLite(t, "election.db")
	// Every write to the file, a standby's busy Acquire included, takes
	// its one write lock, and SQLite's busy handler sleeps up to 100ms
	// between tries: a renewal queued behind four candidates and three
	// processes missed a 1s ttl's Deadline at a load average of 15.
	return electiontest.Harness{New: teststores.OpenURL(u), TTL: 2 * storeTTL, URL: u}
}

// postgresHarness: LEASE_TEST_POSTGRES, in a fresh table.
func postgresHarness(t testing.TB) electiontest.Harness {
	u := teststores.Postgres(t, "election_test")
	return electiontest.Harness{New: teststores.OpenURL(u), TTL: storeTTL, URL: u}
}

// mysqlHarness: LEASE_TEST_MYSQL, in a fresh table.
func mysqlHarness(t testing.TB) electiontest.Harness {
	u := teststores.MySQL(t, "election_test")
	return electiontest.Harness{New: teststores.OpenURL(u), TTL: storeTTL, URL: u}
}

// miniredisHarness: a miniredis whose TTLs run on the wall clock.
func miniredisHarness(t testing.TB) electiontest.Harness {
	u := teststores.Miniredis(t)
	return electiontest.Harness{New: teststores.OpenURL(u), TTL: storeTTL, URL: u}
}

// redisHarness: LEASE_TEST_REDIS, under a fresh key prefix.
func redisHarness(t testing.TB) electiontest.Harness {
	u := teststores.Redis(t, "election")
	return electiontest.Harness{New: teststores.OpenURL(u), TTL: storeTTL, URL: u}
}

// etcdHarness: LEASE_TEST_ETCD, or an embedded server, under a fresh key
// prefix. etcd leases last whole seconds.
func etcdHarness(t testing.TB) electiontest.Harness {
	u := teststores.Etcd(t, "electiontest")
	return electiontest.Harness{New: teststores.OpenURL(u), TTL: storeTTL, ExpiryLag: teststores.EtcdExpiryLag, URL: u}
}
