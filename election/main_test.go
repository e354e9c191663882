package election_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leasekit/lease/election/electiontest"
	"github.com/leasekit/lease/internal/testenv"
)

func TestMain(m *testing.M) {
	electiontest.Child() // a candidate process of the suite's cross-process cases
	testenv.DefaultParallel(8)
	goleak.VerifyTestMain(m)
}
