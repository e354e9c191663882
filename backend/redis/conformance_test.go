package redislease_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
	"github.com/leasekit/lease/conformance"
)

// TestConformanceMiniredisManualClock runs the suite on miniredis with a
// manual clock that moves both its TTLs and its TIME.
func TestConformanceMiniredisManualClock(t *testing.T) {
	_, client, advance := newMiniredis(t)
	conformance.Run(t, conformance.Harness{
		New:     func(testing.TB) lease.Locker { return redislease.New(client) },
		TTL:     50 * time.Millisecond,
		Advance: advance,
	})
}

// TestConformanceMiniredisWallClock runs the suite on miniredis with TTLs
// running on the wall clock, as on a real server, subtests in parallel.
func TestConformanceMiniredisWallClock(t *testing.T) {
	mr := miniredis.RunT(t)
	mr.ClockTTL(true)
	client := newClient(t, mr.Addr())
	conformance.Run(t, conformance.Harness{
		New: func(testing.TB) lease.Locker { return redislease.New(client) },
		TTL: 50 * time.Millisecond,
	})
}

// TestConformanceRedis runs the suite on the real server named by
// LEASE_TEST_REDIS, under a fresh key prefix that it deletes afterwards.
func TestConformanceRedis(t *testing.T) {
	client, _ := realRedis(t, -1)
	prefix := randomPrefix("conformance")
	deleteKeys(t, client, prefix)
	conformance.Run(t, conformance.Harness{
		New: func(testing.TB) lease.Locker { return redislease.New(client, redislease.WithPrefix(prefix)) },
		TTL: 50 * time.Millisecond,
	})
}
