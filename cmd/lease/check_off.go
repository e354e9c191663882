//go:build lease_nocheck

package main

import (
	"context"
)

// check is "lease check" in a binary built with -tags lease_nocheck,
// which leaves out the conformance suite (and with it the testing
// package and porcupine) for a smaller lease command.
func (g *globals) check(context.Context, []string) error {
	return usageErrorf("check: this lease binary was built with -tags lease_nocheck, without the conformance suite; build it without that tag (go install github.com/leasekit/lease/cmd/lease@latest) to run lease check")
}
