package election_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leasekit/lease/election/electiontest"
)

func TestMain(m *testing.M) {
	electiontest.Child() // a candidate process of the suite's cross-process cases
	goleak.VerifyTestMain(m)
}
