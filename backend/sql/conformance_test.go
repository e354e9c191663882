package sqllease

import (
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/conformance"
)

// The SQL stores count time in milliseconds by their own clock, but a
// statement can queue for tens of milliseconds before it reads that clock
// while the suite's parallel subtests commit (and fsync) thousands of
// tenures: on the servers behind other transactions and new connections
// (about 50ms each for PostgreSQL on the CI machine), on SQLite in its
// busy handler, which sleeps up to 100ms between tries for the write
// lock. On the 2-CPU CI machine, loaded by other packages' tests, 100ms
// and then 250ms were occasionally too short for lease.Run to renew
// within the ttl (a renewal every ttl/3 came more than 160ms late).
//
// So the suites are not parallel tests: each runs alone, before the
// parallel tests start, its cases side by side (testParallel at a
// time).
const conformanceTTL = 500 * time.Millisecond

// TestConformanceSQLite runs the suite on a SQLite file, each Locker with
// its own pool, as separate processes would. It gives no NewSkewed:
// SQLite judges expiry by the clock of the machine it runs on, so it is
// proven for one machine's clock only, which is what it is for.
func TestConformanceSQLite(t *testing.T) {
	s := sqliteStore(t)
	conformance.Run(t, conformance.Harness{
		New: func(t testing.TB) lease.Locker { return s.openLocker(t) },
		TTL: conformanceTTL,
	})
}

// TestConformancePostgres runs the suite on LEASE_TEST_POSTGRES, e.g.
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable, in a fresh
// table dropped at the end. Lockers share one pool through New.
func TestConformancePostgres(t *testing.T) {
	s := postgresStore(t)
	conformance.Run(t, conformance.Harness{
		New: func(t testing.TB) lease.Locker { return s.newLocker(t) },
		TTL: conformanceTTL,
		// Every statement judges expiry by clock_timestamp(), the
		// database's clock: no clock of the client's enters it.
		NewSkewed: func(t testing.TB, _ time.Duration) lease.Locker { return s.newLocker(t) },
	})
}

// TestConformanceMySQL runs the suite on LEASE_TEST_MYSQL, a URL like
// mysql://root@127.0.0.1:3306/test (mysql://user:password@host:port/db),
// in a fresh table dropped at the end.
func TestConformanceMySQL(t *testing.T) {
	s := mysqlStore(t)
	conformance.Run(t, conformance.Harness{
		New: func(t testing.TB) lease.Locker { return s.newLocker(t) },
		TTL: conformanceTTL,
		// Every statement judges expiry by UTC_TIMESTAMP(6), the
		// database's clock: no clock of the client's enters it.
		NewSkewed: func(t testing.TB, _ time.Duration) lease.Locker { return s.newLocker(t) },
	})
}

// TestConformanceMySQL8Path runs the suite on LEASE_TEST_MYSQL with
// Acquire forced onto the MySQL 8 path (no INSERT ... RETURNING: upsert
// and read in a transaction), so that path is tested on MariaDB too.
func TestConformanceMySQL8Path(t *testing.T) {
	s := mysqlStore(t)
	conformance.Run(t, conformance.Harness{
		New: func(t testing.TB) lease.Locker {
			l := s.newLocker(t)
			forceMySQL8Path(t, l)
			return l
		},
		TTL: conformanceTTL,
	})
}
