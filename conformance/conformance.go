package conformance

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// long is the ttl of tenures that must not expire during a subtest.
const long = time.Minute

type suite struct {
	h   Harness
	seq atomic.Uint64
}

func newSuite(h Harness) *suite { return &suite{h: h} }

// locker returns a new Locker on the store, closed when t ends.
func (s *suite) locker(t testing.TB) lease.Locker {
	t.Helper()
	l := s.h.New(t)
	if l == nil {
		t.Fatal("Harness.New returned nil")
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

// name returns a name no other subtest or run uses.
func (s *suite) name(label string) string {
	return fmt.Sprintf("%s%d/%s", s.h.Prefix, s.seq.Add(1), label)
}

// pass lets d pass on the store's clock.
func (s *suite) pass(d time.Duration) {
	if s.h.Advance != nil {
		s.h.Advance(d)
		return
	}
	time.Sleep(d)
}

// now is the time from which the suite measures a wait on the store's
// clock.
func (s *suite) now() time.Time { return time.Now() }

// waitPast waits until d has passed on the store's clock since from (plus
// the store's granularity and expiry lag), moving the store's clock when
// the harness can.
func (s *suite) waitPast(from time.Time, d time.Duration) {
	if s.h.Advance != nil {
		s.h.Advance(d + s.h.Granularity + s.h.ExpiryLag)
		return
	}
	time.Sleep(time.Until(from.Add(d + s.h.Granularity + s.h.ExpiryLag)))
}

// expire waits until a tenure of name granted for ttl by a call that
// returned at granted has expired in the store, and checks that the store
// says so. With Advance it moves the store's clock instead.
func (s *suite) expire(t testing.TB, l lease.Locker, name string, ttl time.Duration, granted time.Time) {
	t.Helper()
	if s.h.Advance != nil {
		s.h.Advance(ttl + s.h.Granularity + s.h.ExpiryLag)
	} else {
		time.Sleep(time.Until(granted.Add(ttl + s.h.Granularity)))
	}
	limit := time.Now().Add(s.h.ExpiryLag + 250*time.Millisecond)
	for {
		_, err := l.Inspect(t.Context(), name)
		if errors.Is(err, lease.ErrNotHeld) {
			return
		}
		if err != nil {
			failCall(t, fmt.Sprintf("Inspect(%q) while waiting for expiry", name), err)
		}
		if time.Now().After(limit) {
			t.Fatalf("a tenure of %q granted for %s was still held %s after the grant (Harness.ExpiryLag is %s): the store does not expire tenures", name, ttl, time.Since(granted).Round(time.Millisecond), s.h.ExpiryLag)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// acquire calls Acquire and fails t unless it succeeds with a well-formed
// Lease.
func (s *suite) acquire(t testing.TB, l lease.Locker, name, owner string, ttl time.Duration) (lease.Lease, time.Time) {
	t.Helper()
	start := time.Now()
	got, err := l.Acquire(t.Context(), name, owner, ttl)
	done := time.Now()
	if err != nil {
		failCall(t, fmt.Sprintf("Acquire(%q, %q, %s)", name, owner, ttl), err)
	}
	s.checkLease(t, "Acquire", got, name, owner, ttl, start, done)
	return got, done
}

// renew calls Renew and fails t unless it succeeds, keeping the token.
func (s *suite) renew(t testing.TB, l lease.Locker, held lease.Lease, ttl time.Duration) (lease.Lease, time.Time) {
	t.Helper()
	start := time.Now()
	got, err := l.Renew(t.Context(), held, ttl)
	done := time.Now()
	if err != nil {
		failCall(t, fmt.Sprintf("Renew(%v, %s) of an intact tenure", held, ttl), err)
	}
	s.checkLease(t, "Renew", got, held.Name, held.Owner, ttl, start, done)
	if got.Token != held.Token {
		t.Fatalf("Renew changed the token from %d to %d: a renewal is the same tenure", held.Token, got.Token)
	}
	return got, done
}

// checkLease checks the fields of a Lease returned by a call made between
// start and done for ttl, including that its Deadline is safe.
func (s *suite) checkLease(t testing.TB, op string, got lease.Lease, name, owner string, ttl time.Duration, start, done time.Time) {
	t.Helper()
	if got.Name != name {
		t.Fatalf("%s returned Name %q, want %q", op, got.Name, name)
	}
	if got.Owner != owner {
		t.Fatalf("%s returned Owner %q, want %q", op, got.Owner, owner)
	}
	if got.Token == 0 {
		t.Fatalf("%s returned token 0, which is never a valid token", op)
	}
	if got.Deadline.IsZero() {
		t.Fatalf("%s returned a zero Deadline", op)
	}
	// The Deadline must come from a monotonic reading taken before the
	// request: at most start+ttl-DriftMargin, measured from the latest
	// moment the backend could have read its clock.
	if latest := done.Add(ttl - lease.DriftMargin(ttl)); got.Deadline.After(latest) {
		t.Fatalf("%s returned an unsafe Deadline %s after the latest safe one (request start + ttl %s - drift margin %s): the holder would believe it holds the lease after the store may give it away",
			op, got.Deadline.Sub(latest), ttl, lease.DriftMargin(ttl))
	}
	if earliest := start.Add(ttl / 2); got.Deadline.Before(earliest) {
		t.Fatalf("%s returned a Deadline only %s after the request for a ttl of %s: far too early to be useful", op, got.Deadline.Sub(start), ttl)
	}
	if !strings.Contains(got.Deadline.String(), " m=") {
		t.Fatalf("%s returned a Deadline without a monotonic clock reading (%s): a wall-clock jump would move it", op, got.Deadline)
	}
	// Acquired, where the store records it, is when the tenure began: not
	// after it ends, and not hours away from now.
	if !got.Acquired.IsZero() && (got.Acquired.After(got.Expires) || got.Acquired.Before(done.Add(-time.Hour-ttl)) || got.Acquired.After(done.Add(time.Hour))) {
		t.Fatalf("%s returned Acquired %s with Expires %s: the tenure cannot begin after it ends, or hours from now", op, got.Acquired, got.Expires)
	}
	// Expires is by the store's clock, which may be skewed from ours, but
	// not by hours: a larger gap means a unit error.
	if want := done.Add(ttl); got.Expires.Before(want.Add(-time.Hour)) || got.Expires.After(want.Add(time.Hour)) {
		t.Fatalf("%s returned Expires %s, more than an hour from now+ttl (%s): wrong unit or clock", op, got.Expires, want)
	}
}

// inspect returns the result of Inspect and fails t on errors other than
// ErrNotHeld.
func (s *suite) inspect(t testing.TB, l lease.Locker, name string) (lease.Lease, bool) {
	t.Helper()
	got, err := l.Inspect(t.Context(), name)
	if errors.Is(err, lease.ErrNotHeld) {
		if errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrLost) {
			t.Fatalf("Inspect(%q) error matches ErrNotHeld and another sentinel: %v", name, err)
		}
		return lease.Lease{}, false
	}
	if err != nil {
		failCall(t, fmt.Sprintf("Inspect(%q)", name), err)
	}
	if got.Name != name {
		t.Fatalf("Inspect(%q) returned Name %q", name, got.Name)
	}
	if got.Token == 0 || got.Owner == "" {
		t.Fatalf("Inspect(%q) returned a tenure without owner or token: %+v", name, got)
	}
	return got, true
}

// mustHold fails t unless Inspect shows exactly the tenure want.
func (s *suite) mustHold(t testing.TB, l lease.Locker, want lease.Lease, why string) {
	t.Helper()
	got, ok := s.inspect(t, l, want.Name)
	if !ok {
		t.Fatalf("%s: Inspect(%q) says not held, want held by %q with token %d", why, want.Name, want.Owner, want.Token)
	}
	if got.Owner != want.Owner || got.Token != want.Token {
		t.Fatalf("%s: Inspect(%q) shows owner %q token %d, want owner %q token %d", why, want.Name, got.Owner, got.Token, want.Owner, want.Token)
	}
	if d := got.Expires.Sub(want.Expires); d < -s.h.Granularity-10*time.Millisecond || d > s.h.Granularity+10*time.Millisecond {
		t.Fatalf("%s: Inspect(%q) shows Expires %s, but the holder's Lease says %s", why, want.Name, got.Expires, want.Expires)
	}
	if !got.Deadline.IsZero() {
		t.Fatalf("Inspect(%q) returned a non-zero Deadline; only a holder has a Deadline", want.Name)
	}
	if !want.Acquired.IsZero() {
		if d := got.Acquired.Sub(want.Acquired); d < -s.h.Granularity-10*time.Millisecond || d > s.h.Granularity+10*time.Millisecond {
			t.Fatalf("%s: Inspect(%q) shows Acquired %s, but the holder's Lease says %s (a tenure begins once)", why, want.Name, got.Acquired, want.Acquired)
		}
	}
}

// mustBeFree fails t unless Inspect says nobody holds name.
func (s *suite) mustBeFree(t testing.TB, l lease.Locker, name, why string) {
	t.Helper()
	if got, ok := s.inspect(t, l, name); ok {
		t.Fatalf("%s: Inspect(%q) shows it held by %q with token %d, want ErrNotHeld", why, name, got.Owner, got.Token)
	}
}

// mustBeLost fails t unless err matches ErrLost and no other sentinel.
func mustBeLost(t testing.TB, op string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded; want an error matching ErrLost", op)
	}
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("%s: got %v; want an error matching ErrLost", op, err)
	}
	if errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrInvalid) || errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("%s: error %v matches ErrLost and another sentinel", op, err)
	}
}

// mustBeHeld fails t unless err is a *HeldError naming holder, with a
// Remaining time in (0, ttl+Granularity].
func (s *suite) mustBeHeld(t testing.TB, op string, err error, name, holder string, ttl time.Duration) *lease.HeldError {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded while %q holds %q: two owners would hold one lease", op, holder, name)
	}
	if !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("%s while %q holds %q: got %v; want an error matching ErrHeld", op, holder, name, err)
	}
	if errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrNotHeld) || errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("%s: error %v matches ErrHeld and another sentinel", op, err)
	}
	var he *lease.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("%s: error %v matches ErrHeld but errors.As finds no *lease.HeldError", op, err)
	}
	if he.Name != name || he.Owner != holder {
		t.Fatalf("%s: HeldError names %q held by %q, want %q held by %q", op, he.Name, he.Owner, name, holder)
	}
	if he.Remaining <= 0 || he.Remaining > ttl+s.h.Granularity {
		t.Fatalf("%s: HeldError.Remaining is %s for a tenure of %s", op, he.Remaining, ttl)
	}
	return he
}

// failCall ends the case after a call that should have succeeded failed.
// An error that matches a lease sentinel is a broken promise; any other
// error is the store failing (a refused connection, too many clients),
// which means the case could not judge the store, not that it broke the
// contract: under Check it is reported as Errored, under Run it fails the
// subtest saying so.
func failCall(t testing.TB, call string, err error) {
	t.Helper()
	if !isStoreFailure(err) {
		t.Fatalf("%s: %v", call, err)
	}
	if ct, ok := t.(*caseT); ok {
		ct.storeError("%s: the store failed: %v", call, err)
	}
	t.Fatalf("%s: the store failed: %v", call, err)
}

// couldNotTest ends the case as unable to judge the store, because the
// case's own timing preconditions were not met (see Untested): format
// should give the timings and what to change. Outside the suite's runner
// it skips t.
func couldNotTest(t testing.TB, format string, args ...any) {
	t.Helper()
	if ct, ok := t.(*caseT); ok {
		ct.couldNotTest(format, args...)
	}
	t.Skipf("could not test: "+format, args...)
}

// lateLost ends the case as untested when err is ErrLost from a call
// that renewed held and was answered after held's Deadline: the tenure
// may well have expired before the store saw the call, which is then the
// right answer, and the case's timing could not be kept. A call answered
// before the Deadline that says lost is a broken promise, for the caller
// to fail.
func (s *suite) lateLost(t testing.TB, call string, held lease.Lease, ttl time.Duration, answered time.Time, err error) {
	t.Helper()
	if errors.Is(err, lease.ErrLost) && answered.After(held.Deadline) {
		couldNotTest(t, "%s was answered %s after the lease's Deadline (ttl %s, Harness Granularity %s, ExpiryLag %s), and the tenure may have expired first: the machine or the store was too slow for this ttl; use a longer Harness.TTL",
			call, answered.Sub(held.Deadline).Round(time.Millisecond), ttl, s.h.Granularity, s.h.ExpiryLag)
	}
}

// StoreError ends the case t as unable to judge the store, because the
// store failed in a way the case does not test: for Harness.New or NewAt
// when opening a Locker on the store fails (a refused connection, too many
// clients). Under Check the case is then Errored with what and err as its
// reason, not Failed; under Run its subtest fails saying the store failed.
// An err that matches a lease sentinel is a broken promise, and fails the
// case as t.Fatalf would.
func StoreError(t testing.TB, what string, err error) {
	t.Helper()
	failCall(t, what, err)
}

// isStoreFailure reports whether err is the store failing (a refused
// connection, a timeout, too many clients) rather than a lease outcome: not
// nil, and matching none of the lease sentinels.
func isStoreFailure(err error) bool {
	if err == nil {
		return false
	}
	for _, sentinel := range []error{lease.ErrHeld, lease.ErrLost, lease.ErrNotHeld, lease.ErrInvalid, lease.ErrClosed} {
		if errors.Is(err, sentinel) {
			return false
		}
	}
	return true
}
