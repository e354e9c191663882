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
// The suite is an ordered table of cases (see Cases), one or more per line
// of the contract in the lease package documentation, each named as the
// promise it checks ("old owner cannot release after takeover") and each
// a named function in the file of its contract line (deadline.go holds
// line 7, renew_release.go lines 4 and 5, and so on). Every case is
// bounded by its own timeout, so a store that hangs fails the case that
// hung rather than stalling the run.
//
// Check runs the same cases without the testing package and returns one
// Result per case (passed, failed, skipped, or errored when the store
// failed in a way the case does not test, such as a refused connection),
// for tools like "lease check" that certify a store outside go test.
//
// The suite also checks the optional lease.Lister and lease.ForceReleaser
// interfaces where a Locker implements them, and runs lease.Run over the
// store. Its own tests run it against deliberately broken backends, one
// broken promise each, and require the case named for that promise to
// fail.
package conformance
