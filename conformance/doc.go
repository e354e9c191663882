// Package conformance is the test suite every lease.Locker must pass.
//
// Call Run from a test with a Harness for your store, as
// testing/fstest.TestFS is called with a file system:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Harness{
//			New: func(t testing.TB) lease.Locker { return mybackend.New(db) },
//			TTL: 100 * time.Millisecond,
//		})
//	}
//
// Each contract line of the lease package is a subtest named as a sentence
// ("stale owner cannot release after takeover"), so a failure says which
// promise the store broke. The suite also checks the optional
// lease.Lister and lease.ForceReleaser interfaces where a Locker
// implements them, and runs lease.Run over the store.
package conformance
