package conformance

import (
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// Contract lines 1 to 3 and 6: acquiring, re-entrancy, busy, Inspect.

// acquireFreeName: acquire on a free name starts a tenure that Inspect reports.
func acquireFreeName(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("free")
	s.mustBeFree(t, l, name, "before any Acquire")
	got, _ := s.acquire(t, l, name, "owner-a", long)
	s.mustHold(t, l, got, "after Acquire")
}

// anotherOwnerGetsHeld: another owner gets ErrHeld with the holder and remaining time.
func anotherOwnerGetsHeld(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("busy")
	held, _ := s.acquire(t, l, name, "owner-a", long)
	_, err := l.Acquire(t.Context(), name, "owner-b", long)
	he := s.mustBeHeld(t, "Acquire by owner-b", err, name, "owner-a", long)
	if he.Remaining < long/2 {
		t.Fatalf("HeldError.Remaining is %s right after a %s tenure began", he.Remaining, long)
	}
	s.mustHold(t, l, held, "after the refused Acquire")
}

// holderReacquireKeepsToken: holder's re-acquire keeps the token and moves expiry to now+ttl.
func holderReacquireKeepsToken(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("reentrant")
	// The first tenure lasts 2 TTLs and is re-acquired half a TTL in, so
	// a slow scheduler cannot let it expire first.
	first, granted := s.acquire(t, l, name, "owner-a", 2*s.h.TTL)
	s.pass(s.h.TTL / 2)
	longer := 4*s.h.TTL + 2*s.h.ExpiryLag + 2*s.h.Granularity
	again, _ := s.acquire(t, l, name, "owner-a", longer)
	if again.Token != first.Token {
		t.Fatalf("re-entrant Acquire changed the token from %d to %d; retrying an Acquire must be safe", first.Token, again.Token)
	}
	// Wait past the first tenure's expiry: only the re-acquire keeps it.
	if s.h.Advance != nil {
		s.h.Advance(2*s.h.TTL + s.h.Granularity + s.h.ExpiryLag)
	} else {
		time.Sleep(time.Until(granted.Add(2*s.h.TTL + s.h.Granularity + s.h.ExpiryLag + 50*time.Millisecond)))
	}
	s.mustHold(t, l, again, "after the first ttl passed, following a re-entrant Acquire with a longer ttl")
	_, err := l.Acquire(t.Context(), name, "owner-b", long)
	s.mustBeHeld(t, "Acquire by owner-b after the re-entrant Acquire", err, name, "owner-a", longer)
}

// takeoverAfterExpiry: takeover after expiry gives a larger token.
func takeoverAfterExpiry(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("takeover")
	old, granted := s.acquire(t, l, name, "owner-a", s.h.TTL)
	s.expire(t, l, name, s.h.TTL, granted)
	start := time.Now()
	got, done := s.acquire(t, l, name, "owner-b", long)
	if got.Token <= old.Token {
		t.Fatalf("takeover got token %d, not greater than the expired tenure's %d", got.Token, old.Token)
	}
	if s.h.Advance == nil && !old.Deadline.Before(done) {
		t.Fatalf("the old holder's Deadline was %s after the takeover: it would act as holder while another does", old.Deadline.Sub(start))
	}
	s.mustHold(t, l, got, "after takeover")
}

// expiredHolderReacquires: expired holder's re-acquire starts a new tenure with a larger token.
func expiredHolderReacquires(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("reacquire-expired")
	old, granted := s.acquire(t, l, name, "owner-a", s.h.TTL)
	s.expire(t, l, name, s.h.TTL, granted)
	got, _ := s.acquire(t, l, name, "owner-a", long)
	if got.Token <= old.Token {
		t.Fatalf("Acquire after expiry got token %d, not greater than the expired tenure's %d: an expired tenure must not be revived", got.Token, old.Token)
	}
}

// inspectFreeName: inspect reports a free name as not held.
func inspectFreeName(t testing.TB, s *suite) {
	l := s.locker(t)
	s.mustBeFree(t, l, s.name("never-used"), "a name nobody acquired")
}

// inspectExpired: inspect reports an expired tenure as not held.
func inspectExpired(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("inspect-expired")
	_, granted := s.acquire(t, l, name, "owner-a", s.h.TTL)
	s.expire(t, l, name, s.h.TTL, granted)
	s.mustBeFree(t, l, name, "after expiry")
}

// maximalNameAndOwner: an owner of 255 bytes and a name of 1024 bytes round-trip exactly.
func maximalNameAndOwner(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("")
	name += repeat("n", lease.MaxNameLen-len(name))
	owner := repeat("ö", (lease.MaxOwnerLen-1)/2) + "x"
	got, _ := s.acquire(t, l, name, owner, long)
	s.mustHold(t, l, got, "maximal name and owner")
}

func repeat(s string, n int) string {
	out := make([]byte, 0, n)
	for len(out)+len(s) <= n {
		out = append(out, s...)
	}
	return string(out)
}
