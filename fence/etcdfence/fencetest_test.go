package etcdfence_test

import (
	"testing"

	"github.com/leasekit/lease/fence/fencetest"
)

// TestFencetest runs the shared cases on the shared server: the embedded
// one, or LEASE_TEST_ETCD's.
func TestFencetest(t *testing.T) {
	fencetest.Run(t, harness(t, &testEndpoints))
}

// TestFencetestRestart runs them on a private embedded etcd whose data
// directory outlives a restart in the restart case.
func TestFencetestRestart(t *testing.T) {
	p := startPrivateEtcd(t)
	p.start()
	endpoints := p.endpoints()
	h := harness(t, &endpoints)
	h.Restart = func(testing.TB) { p.restart() }
	fencetest.Run(t, h)
}
