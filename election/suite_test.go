package election_test

import (
	"testing"

	"github.com/leasekit/lease/election/electiontest"
	"github.com/leasekit/lease/internal/testenv"
)

// The suite on every store of this module. The servers' tests skip when
// their variable is unset, and fail in CI (LEASE_TEST_REQUIRE_ALL=1);
// Redis runs on miniredis and etcd on an embedded server when theirs is
// unset. The stores' suites run at once, each its cases in turn; with
// -short only memory's runs.

func TestSuiteMemory(t *testing.T) { t.Parallel(); electiontest.Run(t, memoryHarness(t)) }
func TestSuiteSQLite(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	electiontest.Run(t, sqliteHarness(t))
}
func TestSuitePostgres(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	electiontest.Run(t, postgresHarness(t))
}
func TestSuiteMySQL(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	electiontest.Run(t, mysqlHarness(t))
}
func TestSuiteMiniredis(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	electiontest.Run(t, miniredisHarness(t))
}
func TestSuiteRedis(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	electiontest.Run(t, redisHarness(t))
}
func TestSuiteEtcd(t *testing.T) { testenv.Slow(t); t.Parallel(); electiontest.Run(t, etcdHarness(t)) }
