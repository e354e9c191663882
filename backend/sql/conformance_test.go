package sqllease

import (
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/conformance"
)

// The SQL stores count time in milliseconds by their own clock. SQLite
// answers in well under a millisecond; on the servers, with the suite's
// parallel subtests committing (and fsyncing) thousands of tenures and
// opening connections (about 50ms each for PostgreSQL on the CI machine),
// a statement can queue for tens of milliseconds, so their ttl is longer.
const (
	conformanceTTL       = 100 * time.Millisecond
	conformanceServerTTL = 250 * time.Millisecond
)

// TestConformanceSQLite runs the suite on a SQLite file, each Locker with
// its own pool, as separate processes would.
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
		TTL: conformanceServerTTL,
	})
}

// TestConformanceMySQL runs the suite on LEASE_TEST_MYSQL, a URL like
// mysql://root@127.0.0.1:3306/test (mysql://user:password@host:port/db),
// in a fresh table dropped at the end.
func TestConformanceMySQL(t *testing.T) {
	s := mysqlStore(t)
	conformance.Run(t, conformance.Harness{
		New: func(t testing.TB) lease.Locker { return s.newLocker(t) },
		TTL: conformanceServerTTL,
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
			l.forceNoReturning = true
			return l
		},
		TTL: conformanceServerTTL,
	})
}
