// Package fencetest is the set of cases every fence checker must pass:
// the rule of package fence, proven against a real store.
//
// Call Run from a test with a Harness for your checker, as the lease
// module's conformance suite is called for a Locker:
//
//	func TestFence(t *testing.T) {
//		fencetest.Run(t, fencetest.Harness{
//			New: func(t testing.TB) fencetest.Target { return myTarget(t, db) },
//		})
//	}
//
// A Target is a checker together with the data it guards: the suite makes
// guarded writes, reads the data back to see that a refused write changed
// nothing, and checks tokens through the fence.Checker interface too. Each
// case is a subtest named as a sentence ("a stale token is refused with
// the winning token") and bounded by a timeout, so a failure says which
// promise the checker broke:
//
//   - a stale token is refused with the winning token;
//   - an equal token is accepted, a higher one accepted and remembered;
//   - a refused write changes nothing: neither the data nor the maximum;
//   - Check raises the maximum that guarded writes are held to;
//   - tokens beyond 2^53 (where a float would round) compare exactly;
//   - names are kept apart, including names that differ only after 1000
//     bytes and names with NUL, braces and other awkward characters;
//   - concurrent writers with interleaved tokens, in rounds that release
//     every writer at once: once a round's writers have returned, its
//     largest token was accepted, its stragglers refused, the data holds
//     the largest token's write and the maximum is that token; a read
//     right after an accepted write finds the largest token accepted so
//     far or a larger one; every refusal names a token that was accepted;
//     and no write is accepted below one accepted before it began;
//   - a new connection to the store sees every maximum, and so does the
//     store after a restart (Harness.Restart): maxima raised by a guarded
//     write and by Check alone, and maxima above 2^53, exactly;
//   - bad input is refused with lease.ErrInvalid and a cancelled context
//     is reported as such, never as stale, each changing nothing.
package fencetest
