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
// terms overlap; the case that keeps one leader in office for three ttls
// while others wait reports such a loss as "could not test" (a skip, with
// the timings and the advice to give a longer TTL), and fails when the
// store ended the term before the Deadline its last renewal gave. The
// suite logs the handoff times it sees; measure them with the election
// package's gated measurement.
//
// A failure is reported at the line of the case's own function that
// found it, with the Harness's TTL and ExpiryLag and the times that
// matter (when each term's work began and ended, when the leader's lease
// was last renewed and to which Deadline).
package electiontest
