package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// Contract line 8: bad input is ErrInvalid with a message naming the
// problem, and nothing is written.

// badInputRefused: bad input is refused with ErrInvalid and writes nothing.
func badInputRefused(t testing.TB, s *suite) {
	l := s.locker(t)
	ctx := t.Context()
	good := s.name("input")
	tooLong := good + strings.Repeat("x", lease.MaxNameLen+1-len(good))
	badUTF8 := good + "\xff\xfe"
	longOwner := strings.Repeat("o", lease.MaxOwnerLen+1)
	acquires := []struct {
		what, name, owner string
		ttl               time.Duration
		mention           string
	}{
		{"empty name", "", "owner-a", long, "name"},
		{"name over 1024 bytes", tooLong, "owner-a", long, "name"},
		{"name that is not UTF-8", badUTF8, "owner-a", long, "UTF-8"},
		{"empty owner", good, "", long, "owner"},
		{"owner over 255 bytes", good, longOwner, long, "owner"},
		{"owner that is not UTF-8", good, "owner-\xff", long, "owner"},
		{"zero ttl", good, "owner-a", 0, "ttl"},
		{"negative ttl", good, "owner-a", -time.Second, "ttl"},
		{"ttl too large to represent", good, "owner-a", time.Duration(1<<63 - 1), "ttl"},
	}
	for _, c := range acquires {
		_, err := l.Acquire(ctx, c.name, c.owner, c.ttl)
		mustBeInvalid(t, "Acquire with "+c.what, err, c.mention)
	}
	s.mustBeFree(t, l, good, "after refused Acquires")

	held, _ := s.acquire(t, l, good, "owner-a", long)
	leases := []struct {
		what    string
		l       lease.Lease
		mention string
	}{
		{"the zero Lease", lease.Lease{}, "Lease"},
		{"token 0", lease.Lease{Name: good, Owner: "owner-a"}, "token"},
		{"an empty owner", lease.Lease{Name: good, Token: held.Token}, "owner"},
		{"an empty name", lease.Lease{Owner: "owner-a", Token: held.Token}, "name"},
		{"a name over 1024 bytes", lease.Lease{Name: tooLong, Owner: "owner-a", Token: held.Token}, "name"},
	}
	for _, c := range leases {
		_, err := l.Renew(ctx, c.l, long)
		mustBeInvalid(t, "Renew with "+c.what, err, c.mention)
		err = l.Release(ctx, c.l)
		mustBeInvalid(t, "Release with "+c.what, err, c.mention)
	}
	for _, ttl := range []time.Duration{0, -time.Second} {
		_, err := l.Renew(ctx, held, ttl)
		mustBeInvalid(t, "Renew with ttl "+ttl.String(), err, "ttl")
	}
	for _, name := range []string{"", tooLong, badUTF8} {
		_, err := l.Inspect(ctx, name)
		mustBeInvalid(t, "Inspect of an invalid name", err, "name")
	}
	s.mustHold(t, l, held, "after refused Renew and Release calls")
}

// canceledContext: canceled context is reported as such, not as held or lost.
func canceledContext(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("canceled")
	held, _ := s.acquire(t, l, name, "owner-a", long)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := l.Acquire(ctx, s.name("canceled-free"), "owner-b", long)
	mustBeCanceled(t, "Acquire with a canceled context", err)
	_, err = l.Acquire(ctx, name, "owner-b", long)
	mustBeCanceled(t, "Acquire of a held name with a canceled context", err)
	_, err = l.Renew(ctx, held, long)
	mustBeCanceled(t, "Renew with a canceled context", err)
	err = l.Release(ctx, held)
	mustBeCanceled(t, "Release with a canceled context", err)
	_, err = l.Inspect(ctx, name)
	mustBeCanceled(t, "Inspect with a canceled context", err)
	s.mustHold(t, l, held, "after calls with a canceled context")
}

// closedLockerRefuses: a closed locker refuses every call with ErrClosed.
func closedLockerRefuses(t testing.TB, s *suite) {
	l := s.h.New(t)
	other := s.locker(t)
	name := s.name("closed")
	held, _ := s.acquire(t, l, name, "owner-a", long)
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := t.Context()
	_, err := l.Acquire(ctx, s.name("closed-free"), "owner-b", long)
	mustBeClosed(t, "Acquire after Close", err)
	_, err = l.Renew(ctx, held, long)
	mustBeClosed(t, "Renew after Close", err)
	err = l.Release(ctx, held)
	mustBeClosed(t, "Release after Close", err)
	_, err = l.Inspect(ctx, name)
	mustBeClosed(t, "Inspect after Close", err)
	s.mustHold(t, other, held, "a tenure taken before Close, seen from another Locker")
}

func mustBeInvalid(t testing.TB, op string, err error, mention string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded; want an error matching ErrInvalid", op)
	}
	if !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("%s: got %v; want an error matching ErrInvalid", op, err)
	}
	if errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("%s: error %v matches ErrInvalid and another sentinel", op, err)
	}
	if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(mention)) {
		t.Fatalf("%s: error %q does not name the problem (%s)", op, err, mention)
	}
}

func mustBeCanceled(t testing.TB, op string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded", op)
	}
	if errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("%s: got %v, disguised as a lease outcome", op, err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%s: got %v; want an error wrapping context.Canceled", op, err)
	}
}

func mustBeClosed(t testing.TB, op string, err error) {
	t.Helper()
	if !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("%s: got %v; want an error matching ErrClosed", op, err)
	}
	if errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("%s: error %v matches ErrClosed and a lease outcome", op, err)
	}
}

// ttlLimits: ttls from MinTTL to MaxTTL are accepted and nothing outside
// them.
func ttlLimits(t testing.TB, s *suite) {
	l := s.locker(t)
	ctx := t.Context()
	name := s.name("ttl-limits")
	for _, ttl := range []time.Duration{lease.MinTTL - 1, lease.MaxTTL + 1} {
		_, err := l.Acquire(ctx, name, "owner-a", ttl)
		mustBeInvalid(t, "Acquire with ttl "+ttl.String(), err, "ttl")
	}
	s.mustBeFree(t, l, name, "after Acquires with ttls outside the limits")

	// The longest tenure is granted and can be released.
	longest, _ := s.acquire(t, l, name, "owner-a", lease.MaxTTL)
	for _, ttl := range []time.Duration{lease.MinTTL - 1, lease.MaxTTL + 1} {
		_, err := l.Renew(ctx, longest, ttl)
		mustBeInvalid(t, "Renew with ttl "+ttl.String(), err, "ttl")
	}
	if _, err := l.Renew(ctx, longest, lease.MaxTTL); err != nil {
		failCall(t, "Renew with MaxTTL", err)
	}
	if err := l.Release(ctx, longest); err != nil {
		failCall(t, "Release of a MaxTTL tenure", err)
	}

	// The shortest is granted and expires (the store may round it up to
	// its granularity).
	shortest, granted := s.acquire(t, l, name, "owner-a", lease.MinTTL)
	if shortest.Token <= longest.Token {
		t.Fatalf("a tenure after Release got token %d, not greater than %d", shortest.Token, longest.Token)
	}
	s.expire(t, l, name, lease.MinTTL, granted)
}
