// Package semaphoretest is the test suite that proves package semaphore
// on a store: call Run from a test with a Harness for the store, as
// conformance.Run is called for a Locker, or Check from a tool.
//
//	func TestSemaphore(t *testing.T) {
//		semaphoretest.Run(t, semaphoretest.Harness{
//			New: func(t testing.TB) lease.Locker { return mybackend.New(db) },
//			TTL: time.Second,
//		})
//	}
//
// The suite is a table of cases (Cases), each named as the promise it
// checks ("never more than N holders at once"), each a named function,
// each bounded by its own timeout, and each reported as a Result. Every
// holder a case runs is on its own Locker, as another process's
// connection would be, and records its interval on a shared ledger: from
// the moment its slot was granted (its work starts) to the moment its
// work ends, or its slot's Deadline if that comes first (a holder whose
// renewals stopped is no holder past its Deadline). The ledger then
// checks the intervals: never more than N overlapping, never two
// overlapping on one slot, and each slot's tokens strictly increasing in
// the order of the grants.
//
// Timing: the suite asserts orderings, and only generous bounds on time
// (a crashed holder's slot frees within the ttl plus the store's expiry
// lag plus a slack of two seconds or two ttls, whichever is longer).
package semaphoretest
