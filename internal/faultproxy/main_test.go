package faultproxy_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no proxy goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
