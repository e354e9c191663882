package conformance

import (
	"testing"
	"time"
)

// testCase is one case of the suite: a promise as a sentence, the
// contract line it checks, and the function that checks it.
type testCase struct {
	name     string
	contract string
	fn       func(t testing.TB, s *suite)
	// budget is how long the case may take beyond its expiry waits; zero
	// means defaultBudget.
	budget time.Duration
	// waits is how many tenure expiries (Harness.TTL + Granularity +
	// ExpiryLag) the case waits for, at most.
	waits int
}

const defaultBudget = 30 * time.Second

// timeout bounds the case on h's store.
func (c testCase) timeout(h Harness) time.Duration {
	b := c.budget
	if b == 0 {
		b = defaultBudget
	}
	return b + time.Duration(c.waits)*(4*h.TTL+h.Granularity+h.ExpiryLag)
}

// cases is the suite, in the order of the contract's lines (see the lease
// package documentation), then Close, the optional interfaces, lease.Run
// over the store, and the history check that ties them together. Every
// case is a named function in the file of its contract line.
var cases = []testCase{
	// 1. Acquire of a free, released or expired name starts a tenure with a
	// larger token.
	{name: "acquire on a free name starts a tenure that Inspect reports", contract: "1", fn: acquireFreeName},
	{name: "takeover after expiry gives a larger token", contract: "1", fn: takeoverAfterExpiry, waits: 1},
	{name: "expired holder's re-acquire starts a new tenure with a larger token", contract: "1", fn: expiredHolderReacquires, waits: 1},
	{name: "thousands of tenures get strictly increasing tokens", contract: "1", fn: tokensStrictlyIncrease, budget: 3 * time.Minute},
	// 2. Re-entrancy.
	{name: "holder's re-acquire keeps the token and moves expiry to now+ttl", contract: "2", fn: holderReacquireKeepsToken, waits: 3},
	{name: "renew and re-acquire with a shorter ttl end the tenure sooner", contract: "2, 4", fn: shorterTTLEndsSooner, waits: 2},
	// 3. Busy.
	{name: "another owner gets ErrHeld with the holder and remaining time", contract: "3", fn: anotherOwnerGetsHeld},
	// 4. Renew.
	{name: "renew keeps the token and moves expiry to now+ttl", contract: "4", fn: renewKeepsToken, waits: 3},
	{name: "old owner cannot renew after takeover", contract: "4", fn: oldOwnerCannotRenewAfterTakeover, waits: 1},
	{name: "old owner cannot renew after plain expiry", contract: "4", fn: oldOwnerCannotRenewAfterExpiry, waits: 1},
	{name: "a batch of renewals gives each tenure the answer Renew would", contract: "4, batch", fn: batchRenewMatchesRenew, waits: 1},
	{name: "tenures acquired together expire on their own when only some are renewed", contract: "4, batch", fn: partOfABurstRenewed, waits: 2},
	{name: "a batch answers each request in its place, whatever their order", contract: "4, batch", fn: batchAnswersInPlace},
	{name: "a batch that mixes ttls gives each tenure its own", contract: "4, batch", fn: batchMixedTTLs, waits: 1},
	{name: "a batch that renews a taken-over tenure leaves the taker's expiry as its grant set it", contract: "4, batch", fn: batchLeavesTakerAlone, waits: 3},
	{name: "a batch as large as Run sends keeps every tenure held past its first expiry", contract: "4, batch", fn: batchAsLargeAsRun, waits: 2},
	// 5. Release.
	{name: "release frees the name for another owner at once", contract: "5", fn: releaseFreesName},
	{name: "a locker told the name is held acquires it at once after another locker releases it", contract: "3, 5", fn: releaseElsewhereFreesName},
	{name: "release then re-acquire by the same owner gets a larger token", contract: "5", fn: releaseThenReacquire},
	{name: "released lease cannot be renewed or released again", contract: "5", fn: releasedLeaseIsLost},
	{name: "old owner cannot release after takeover", contract: "5", fn: oldOwnerCannotReleaseAfterTakeover, waits: 1},
	{name: "old owner cannot release after plain expiry", contract: "5", fn: oldOwnerCannotReleaseAfterExpiry, waits: 1},
	{name: "old owner cannot renew or release after its own re-acquire started a new tenure", contract: "4, 5", fn: oldTenureOfSameOwnerIsLost, waits: 1},
	{name: "renew and release check owner and token, not just the name", contract: "4, 5", fn: forgedLeaseIsLost},
	// 6. Inspect.
	{name: "inspect reports a free name as not held", contract: "6", fn: inspectFreeName},
	{name: "inspect reports an expired tenure as not held", contract: "6", fn: inspectExpired, waits: 1},
	// 7. Clocks and the Deadline.
	{name: "the Deadline is read before the request and ends a drift margin early", contract: "7", fn: deadlineIsConservative},
	{name: "no other owner acquires a name before the previous holder's Deadline", contract: "7", fn: noTakeoverBeforeDeadline, waits: 8},
	{name: "Lockers whose clocks disagree see the same expiry: the store's", contract: "7", fn: skewedClientsAgree, waits: 2},
	// 8. Input.
	{name: "bad input is refused with ErrInvalid and writes nothing", contract: "8", fn: badInputRefused},
	{name: "ttls from MinTTL to MaxTTL are accepted and nothing outside them", contract: "8", fn: ttlLimits, waits: 1},
	{name: "an owner of 255 bytes and a name of 1024 bytes round-trip exactly", contract: "8", fn: maximalNameAndOwner},
	{name: "names with awkward characters never collide", contract: "8", fn: awkwardNames},
	{name: "long names sharing a 1000-byte prefix do not collide", contract: "8", fn: longNamesSharingAPrefix},
	// 9. Failures are never disguised as outcomes.
	{name: "canceled context is reported as such, not as held or lost", contract: "9", fn: canceledContext},
	{name: "every call on a store that stops answering returns by its context's deadline", contract: "9, faults", fn: faultStallEndsByDeadline},
	{name: "a Release whose reply is lost is not reported as lost", contract: "5, 9, faults", fn: faultLostReleaseReply},
	{name: "an Acquire whose reply is lost can be retried by the same owner", contract: "2, 9, faults", fn: faultLostAcquireReply},
	{name: "a connection reset mid-call is a store failure, never held or lost", contract: "9, faults", fn: faultResetIsStoreError},
	{name: "a holder whose store stops answering stops before anyone else takes over", contract: "7, faults", fn: faultStalledHolderStopsFirst, waits: 6},
	{name: "Run never enters fn on a store slower than the ttl", contract: "7, faults", fn: faultSlowStoreNeverEntersFn, waits: 2},
	{name: "the Deadline counts from before the request when replies are slow", contract: "7, faults", fn: faultSlowRepliesDeadline},
	// 10. Concurrency.
	{name: "concurrent acquires on a free name: exactly one wins", contract: "10", fn: concurrentAcquiresOneWins},
	{name: "a burst of acquires gives each the answer it would get alone", contract: "1, 2, 3, 10", fn: burstGivesSingleAnswers},
	// Close.
	{name: "a closed locker refuses every call with ErrClosed", contract: "close", fn: closedLockerRefuses},
	// The optional interfaces, where the Locker implements them.
	{name: "lease.Can says an optional interface works exactly when it does", contract: "can", fn: canTellsTheTruth},
	{name: "list returns the held tenures under a prefix in name order", contract: "lister", fn: listUnderPrefix, waits: 1},
	{name: "force release ends any tenure and keeps token order", contract: "force-release", fn: forceRelease},
	{name: "a watch wakes when the name is released or force-released", contract: "waiter", fn: watchWakesOnRelease},
	{name: "a watch wakes when another locker releases or force-releases the name", contract: "waiter", fn: watchWakesOnAnotherLockersRelease},
	{name: "a release wakes only the waiting locker whose mark is oldest", contract: "turn", fn: turnWakesOldestMark},
	{name: "with no mark placed a release wakes every turn watch", contract: "turn", fn: turnWithoutMarksWakesAll},
	{name: "a lapsed mark no longer gets the turn", contract: "turn", fn: turnMarkLapses, budget: defaultBudget + 4*time.Second},
	{name: "a waiter whose turn came and who gives up passes the turn on at once", contract: "turn", fn: turnPassesOn},
	{name: "fair waiters get a free name in the order they came", contract: "fair", fn: fairLineOrder},
	{name: "a fair waiter that gives up or lets its mark lapse holds up no one", contract: "fair", fn: fairGiveUpAndLapse, waits: 1},
	{name: "the holder's fair Acquire re-enters and keeps no place; a plain Acquire passes the line", contract: "fair", fn: fairHolderAndBarger},
	// lease.Run over the store.
	{name: "Run holds the lease while fn runs and releases it after", contract: "run", fn: runHoldsAndReleases},
	{name: "Run returns HeldError without calling fn when the lease is busy", contract: "run", fn: runBusyNeverCallsFn},
	{name: "two concurrent Runs for one name: only one runs fn", contract: "run", fn: runConcurrentOnlyOne},
	{name: "Run cancels fn's context with ErrLost when a renewal finds the lease lost", contract: "run", fn: runCancelsOnLoss, waits: 6},
	{name: "Run renews the lease while fn outlives the ttl", contract: "run", fn: runRenewsWhileFnRuns, waits: 4},
	{name: "Run never enters fn when the grant arrives after its Deadline", contract: "run, 7", fn: runLateGrantNeverEntersFn, waits: 2},
	// Everything at once.
	{name: "history of concurrent acquire, renew, release and inspect is linearizable", contract: "1-6, 10", fn: historyLinearizable, budget: 3 * time.Minute},
}

// Case describes one case of the suite.
type Case struct {
	// Name is the promise the case checks, as a sentence; it is the
	// subtest's name under Run and Result.Case under Check.
	Name string
	// Contract is the contract line (or lines) the case checks: "1" to
	// "10" as numbered in the lease package documentation, "close" for
	// Close, "batch", "lister", "force-release", "waiter", "turn" and "fair" for the optional
	// interfaces, "run" for lease.Run over the store.
	Contract string
}

// Cases returns the suite's cases in the order Run and Check run them.
func Cases() []Case {
	out := make([]Case, len(cases))
	for i, c := range cases {
		out[i] = Case{Name: c.name, Contract: c.contract}
	}
	return out
}
