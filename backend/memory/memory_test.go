package memory_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/conformance"
	"github.com/leasekit/lease/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.DefaultParallel(8)
	goleak.VerifyTestMain(m)
}

func TestConformanceSystemClock(t *testing.T) {
	store := memory.New()
	conformance.Run(t, conformance.Harness{
		New: func(testing.TB) lease.Locker { return store.Share() },
		TTL: 100 * time.Millisecond,
		// Every handle judges expiry by the store's Clock.
		NewSkewed: func(testing.TB, time.Duration) lease.Locker { return store.Share() },
	})
}

func TestConformanceManualClock(t *testing.T) {
	clock := memory.NewManualClock(time.Now())
	store := memory.New(memory.WithClock(clock))
	conformance.Run(t, conformance.Harness{
		New:     func(testing.TB) lease.Locker { return store.Share() },
		TTL:     time.Second,
		Advance: clock.Advance,
	})
}
