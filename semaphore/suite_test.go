package semaphore_test

import (
	"testing"

	"github.com/leasekit/lease/semaphore/semaphoretest"
)

// The suite on every store of this module. The servers' tests skip when
// their variable is unset, and fail in CI (LEASE_TEST_REQUIRE_ALL=1);
// Redis runs on miniredis and etcd on an embedded server when theirs is
// unset.

func TestSuiteMemory(t *testing.T)    { semaphoretest.Run(t, memoryHarness(t)) }
func TestSuiteSQLite(t *testing.T)    { semaphoretest.Run(t, sqliteHarness(t)) }
func TestSuitePostgres(t *testing.T)  { semaphoretest.Run(t, postgresHarness(t)) }
func TestSuiteMySQL(t *testing.T)     { semaphoretest.Run(t, mysqlHarness(t)) }
func TestSuiteMiniredis(t *testing.T) { semaphoretest.Run(t, miniredisHarness(t)) }
func TestSuiteRedis(t *testing.T)     { semaphoretest.Run(t, redisHarness(t)) }
func TestSuiteEtcd(t *testing.T)      { semaphoretest.Run(t, etcdHarness(t)) }
