package conformance

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/leasekit/lease"
)

// Contract lines 1 and 10: one winner among concurrent Acquires, and
// tokens that only grow.

// concurrentAcquiresOneWins: concurrent acquires on a free name: exactly one wins.
func concurrentAcquiresOneWins(t testing.TB, s *suite) {
	const goroutines, rounds = 32, 4
	lockers := []lease.Locker{s.locker(t), s.locker(t)}
	for round := 0; round < rounds; round++ {
		name := s.name(fmt.Sprintf("contended-%d", round))
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			results = make([]error, goroutines)
			leases  = make([]lease.Lease, goroutines)
		)
		for i := 0; i < goroutines; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				leases[i], results[i] = lockers[i%2].Acquire(t.Context(), name, fmt.Sprintf("owner-%d", i), long)
			}(i)
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range results {
			if err == nil {
				if winner >= 0 {
					t.Fatalf("round %d: owner-%d and owner-%d both acquired %q", round, winner, i, name)
				}
				winner = i
			}
		}
		if winner < 0 {
			if isStoreFailure(results[0]) {
				failCall(t, fmt.Sprintf("round %d: Acquire of the free name %q", round, name), results[0])
			}
			t.Fatalf("round %d: no goroutine acquired the free name %q; first error: %v", round, name, results[0])
		}
		for i, err := range results {
			if i == winner {
				continue
			}
			if !errors.Is(err, lease.ErrHeld) {
				t.Fatalf("round %d: a losing Acquire got %v; want ErrHeld (contention is not a failure)", round, err)
			}
			var he *lease.HeldError
			if errors.As(err, &he) && he.Owner != leases[winner].Owner {
				t.Fatalf("round %d: a losing Acquire was told %q holds the lease, but %q won", round, he.Owner, leases[winner].Owner)
			}
		}
		s.mustHold(t, lockers[0], leases[winner], "after the contended Acquires")
	}
}

// tokensStrictlyIncrease: thousands of tenures get strictly increasing tokens.
func tokensStrictlyIncrease(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("tokens")
	ctx := t.Context()
	var last uint64
	for i := 0; i < s.h.Tenures; i++ {
		owner := fmt.Sprintf("owner-%d", i%3)
		got, err := l.Acquire(ctx, name, owner, long)
		if err != nil {
			failCall(t, fmt.Sprintf("tenure %d: Acquire", i), err)
		}
		if got.Token <= last {
			t.Fatalf("tenure %d got token %d, not greater than the previous tenure's %d", i, got.Token, last)
		}
		last = got.Token
		if i%16 == 0 {
			again, err := l.Acquire(ctx, name, owner, long)
			if err != nil || again.Token != got.Token {
				t.Fatalf("tenure %d: re-entrant Acquire got token %d, err %v; want token %d", i, again.Token, err, got.Token)
			}
		}
		if err := l.Release(ctx, got); err != nil {
			t.Fatalf("tenure %d: Release: %v", i, err)
		}
	}
}
