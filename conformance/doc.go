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
// A case fails only when a promise was broken. A store failure the case
// does not test (a refused connection) makes it Errored, and a case whose
// own timing preconditions were not met (a renewal answered after the
// lease's Deadline on a loaded machine or a slow link) Untested, with the
// timings and what to change; under Run both skip or end the subtest
// saying so, never as a broken promise. Every failure names the case's
// own file, line and function (and the suite's helper that checked), the
// contract line, and the Harness's TTL, Granularity and ExpiryLag.
//
// Check runs the same cases without the testing package and returns one
// Result per case (passed, failed, skipped, errored or untested), for
// tools like "lease check" that certify a store outside go test.
//
// The suite also checks the optional interfaces where a Locker implements
// them (RenewBatch as driver.Locker has it, lease.Lister,
// lease.ForceReleaser, driver.Watcher and the waiting line), and runs lease.Run over the store. Expiry by the store's clock is
// checked across Lockers whose clocks disagree when the Harness gives
// NewSkewed; without it the store is reported as proven on one clock
// only. Its own tests run it against deliberately broken backends, one
// broken promise each, and require the case named for that promise to
// fail.
//
// # Guide
//
// Certifying a store of your own, with the suite and the lease command's
// check: https://github.com/leasekit/lease/blob/main/docs/certify.md.
package conformance
