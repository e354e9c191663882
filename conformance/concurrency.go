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

// burstGivesSingleAnswers: a burst of concurrent Acquires on one Locker
// (which a store may send in shared requests: etcd shares lease grants,
// SQL shares takeover statements) gives each the answer it would get
// alone: a free name is acquired, a name another owner holds is ErrHeld
// naming it, a name the caller holds is re-entered with its token, and
// of owners racing for one free name exactly one wins while the others
// are told it holds it.
func burstGivesSingleAnswers(t testing.TB, s *suite) {
	l := s.locker(t)
	ttl := long
	type want struct {
		name, owner string
		held        string // held by this other owner
		token       uint64 // re-entrant: keeps this token
		race        bool
	}
	var wants []want
	for i := range 40 {
		wants = append(wants, want{name: s.name(fmt.Sprintf("burst-free-%d", i)), owner: "owner-a"})
	}
	for i := range 10 {
		name := s.name(fmt.Sprintf("burst-held-%d", i))
		s.acquire(t, l, name, "owner-b", ttl)
		wants = append(wants, want{name: name, owner: "owner-a", held: "owner-b"})
	}
	for i := range 10 {
		name := s.name(fmt.Sprintf("burst-mine-%d", i))
		got, _ := s.acquire(t, l, name, "owner-a", ttl)
		wants = append(wants, want{name: name, owner: "owner-a", token: got.Token})
	}
	for i := range 10 {
		name := s.name(fmt.Sprintf("burst-race-%d", i))
		for _, o := range []string{"owner-c", "owner-d", "owner-e"} {
			wants = append(wants, want{name: name, owner: o, race: true})
		}
	}
	got := make([]lease.Lease, len(wants))
	errs := make([]error, len(wants))
	var wg sync.WaitGroup
	for i, w := range wants {
		wg.Go(func() { got[i], errs[i] = l.Acquire(t.Context(), w.name, w.owner, ttl) })
	}
	wg.Wait()
	winners := map[string]string{}
	for i, w := range wants {
		var he *lease.HeldError
		err := errs[i]
		switch {
		case w.race && err == nil:
			if prev, ok := winners[w.name]; ok {
				t.Fatalf("%q: both %s and %s acquired it", w.name, prev, w.owner)
			}
			winners[w.name] = w.owner
		case w.race:
			if !errors.As(err, &he) {
				failCall(t, fmt.Sprintf("Acquire(%q) racing for a free name", w.name), err)
			}
		case w.held != "":
			if !errors.As(err, &he) || he.Owner != w.held {
				t.Fatalf("Acquire(%q), held by %s, in a burst = %v; want ErrHeld naming %s", w.name, w.held, err, w.held)
			}
		case err != nil:
			failCall(t, fmt.Sprintf("Acquire(%q) in a burst", w.name), err)
		case w.token != 0 && got[i].Token != w.token:
			t.Fatalf("re-entrant Acquire(%q) in a burst changed the token from %d to %d", w.name, w.token, got[i].Token)
		case got[i].Owner != w.owner || got[i].Token == 0:
			t.Fatalf("Acquire(%q) in a burst returned %+v", w.name, got[i])
		}
	}
	for i, w := range wants {
		var he *lease.HeldError
		if w.race && errors.As(errs[i], &he) && he.Owner != winners[w.name] {
			t.Fatalf("Acquire(%q) by %s: told %s holds it, but %s won", w.name, w.owner, he.Owner, winners[w.name])
		}
	}
	if len(winners) != 10 {
		t.Fatalf("%d of 10 names raced for in a burst were acquired; want all", len(winners))
	}
	for i := range wants {
		if errs[i] == nil {
			s.mustHold(t, l, got[i], "after a burst of Acquires")
		}
	}
}
