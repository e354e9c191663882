package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Every mode ends what it starts: proxies, sessions, pools, jobs. The
// test binary is also the net mode's proxy child (see proxy_process.go).
func TestMain(m *testing.M) {
	if code, ok := proxyChild(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}
