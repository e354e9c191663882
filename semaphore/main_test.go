package semaphore_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leasekit/lease/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.DefaultParallel(8)
	goleak.VerifyTestMain(m)
}
