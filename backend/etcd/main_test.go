package etcdlease

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/leasekit/lease/internal/etcdtest"
	"github.com/leasekit/lease/internal/testenv"
	"go.uber.org/goleak"
)

// testEndpoints are the endpoints of the etcd server the package's tests
// share: LEASE_TEST_ETCD's, or an embedded server started by TestMain.
var testEndpoints []string

// TestMain shares one etcd server among the tests and, after stopping it,
// checks that no goroutine (of the Lockers, the clients or the embedded
// servers) outlived the tests.
func TestMain(m *testing.M) {
	testenv.DefaultParallel(testParallel)
	code := run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: goroutines outlived the tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testParallel is how many of the package's parallel tests (and
// conformance cases) run at once unless -test.parallel says otherwise: the
// conformance suite's own default (Harness.Parallel). The tests mostly
// wait (for ttls, expiries, watches), not compute, so go test's default,
// GOMAXPROCS (2 on a small CI machine), would leave them waiting in turn.
// The tests whose assertions are about timing under load (failovers,
// deadlines, expiry margins) or about the whole process (goroutines) are
// not parallel: they run alone, before the parallel ones start.
const testParallel = 8

func run(m *testing.M) int {
	testEndpoints = etcdtest.External()
	if testEndpoints == nil {
		srv, err := etcdtest.Start()
		if err != nil {
			fmt.Fprintln(os.Stderr, "etcdtest:", err)
			return 1
		}
		defer srv.Close()
		testEndpoints = srv.Endpoints()
	}
	// The Example reads the endpoints from the environment, as a program
	// would.
	if err := os.Setenv("ETCD_ENDPOINTS", strings.Join(testEndpoints, ",")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
