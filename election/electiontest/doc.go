// Package electiontest is the test suite that proves package election on
// a store: call Run from a test with a Harness for the store, as
// conformance.Run is called for a Locker.
//
//	func TestElection(t *testing.T) {
//		electiontest.Run(t, electiontest.Harness{
//			New: func(t testing.TB) lease.Locker { return mybackend.New(db) },
//			TTL: 500 * time.Millisecond,
//			URL: "mystore://...", // for the cross-process cases
//		})
//	}
//
// The suite is a table of cases, each named as the promise it checks ("a
// resigning leader's work returns before the next leader's starts"), each
// a named function, and each bounded by its own timeout. Every Work the
// cases run records its start and end on a shared fence (fence.Memory,
// guarded writes under the term number): a Work that ends after a later
// term started is refused by the fence, so overlap is caught by the fence
// itself, not only by the timestamps, and the timestamps give the handoff
// times the suite logs.
//
// Two cases run candidates in other processes: this test binary started
// again, with a variable that makes Child, called first in TestMain, run a
// candidate instead of the tests. They open the store from Harness.URL
// with lease.Open, so the test binary must import the backend that
// registers its scheme. Without a URL (the memory store lives in one
// process) those cases are skipped.
//
// Timing: the suite asserts orderings (no overlap, increasing terms,
// callbacks in pairs) and only generous bounds on time (a dead leader is
// replaced within the ttl plus the store's expiry lag plus a slack of two
// seconds or two ttls, whichever is longer). A term lost because the
// store was too slow to renew it is no broken promise, as long as no two
// terms overlap. The suite logs the handoff times it sees; measure them
// with the election package's gated measurement.
package electiontest
