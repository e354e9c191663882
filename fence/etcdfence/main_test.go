package etcdfence_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/leasekit/lease/internal/etcdtest"
)

// testEndpoints are the endpoints of the etcd server the package's tests
// share: LEASE_TEST_ETCD's, or an embedded server started by TestMain.
var testEndpoints []string

// TestMain shares one etcd server among the tests and, after stopping it,
// checks that no goroutine outlived them.
func TestMain(m *testing.M) {
	code := run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: goroutines outlived the tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

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
