package sqllease

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leasekit/lease/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.DefaultParallel(testParallel)
	goleak.VerifyTestMain(m)
}

// testParallel is how many of the package's parallel tests (and
// conformance cases) run at once unless -test.parallel says otherwise.
// Most tests wait (for ttls, expiries, notifications, the databases),
// not compute, so go test's default, GOMAXPROCS (2 on a small CI
// machine), would leave them waiting in turn. It is not the suite's own
// default of 8 (Harness.Parallel): 8 conformance cases at once on one
// SQLite file, under -race on 2 CPUs, answered renewals of the batch
// cases too late to test (reported as "could not test" skips); 4 did
// not. Each parallel test has tables, files and names of its own
// (testStore) and never drops or restarts a shared server. The tests
// whose assertions are about timing under load (a call returning
// within a bound of its deadline, a short tenure still held, "at once",
// this machine's clock against the database's) are not parallel: they
// run before the parallel ones start, with only each other's subtests.
const testParallel = 4
