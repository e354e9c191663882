package main

import (
	"testing"

	"go.uber.org/goleak"
)

// Every mode ends what it starts: proxies, sessions, pools, jobs.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
