package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/conformance"
)

// checkChild runs the conformance suite against the store cfg names, with
// the testing package's runner reading its -test.* flags from the command
// line that runCheckChild built, and returns the exit code.
func checkChild(conf string) int {
	var cfg checkConfig
	if err := json.Unmarshal([]byte(conf), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "lease: check: bad %s: %v\n", checkChildEnv, err)
		return exitUsage
	}
	h := conformance.Harness{
		New: func(t testing.TB) lease.Locker {
			l, err := lease.Open(context.Background(), cfg.URL)
			if err != nil {
				t.Fatalf("opening the store: %v", err)
			}
			return l
		},
		TTL:         cfg.TTL,
		Granularity: cfg.Granularity,
		ExpiryLag:   cfg.ExpiryLag,
		Tenures:     cfg.Tenures,
		Prefix:      cfg.Prefix,
	}
	tests := []testing.InternalTest{{
		Name: checkTest,
		F:    func(t *testing.T) { conformance.Run(t, h) },
	}}
	// testing.Main parses the -test.* flags and exits the process.
	testing.Main(regexp.MatchString, tests, nil, nil)
	return exitFailure
}
