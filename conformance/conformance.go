package conformance

import "testing"

// Run runs the whole suite against h's store. It fails t on any broken
// promise; see the package documentation.
func Run(t *testing.T, h Harness) {
	t.Helper()
	t.Skip("conformance suite under construction")
}
