package conformance

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// Contract lines 4 and 5: Renew and Release, and what a stale owner can
// no longer do.

// renewKeepsToken: renew keeps the token and moves expiry to now+ttl.
func renewKeepsToken(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("renew")
	// As in the re-entrancy case: 2 TTLs, renewed half a TTL in.
	first, granted := s.acquire(t, l, name, "owner-a", 2*s.h.TTL)
	s.pass(s.h.TTL / 2)
	longer := 4*s.h.TTL + 2*s.h.ExpiryLag + 2*s.h.Granularity
	renewed, _ := s.renew(t, l, first, longer)
	if !renewed.Acquired.Equal(first.Acquired) {
		t.Fatalf("Renew moved Acquired from %s to %s: a renewal continues the tenure that began then", first.Acquired, renewed.Acquired)
	}
	if renewed.Expires.Before(first.Expires.Add(-s.h.Granularity)) {
		t.Fatalf("Renew moved Expires back from %s to %s", first.Expires, renewed.Expires)
	}
	if s.h.Advance != nil {
		s.h.Advance(2*s.h.TTL + s.h.Granularity + s.h.ExpiryLag)
	} else {
		time.Sleep(time.Until(granted.Add(2*s.h.TTL + s.h.Granularity + s.h.ExpiryLag + 50*time.Millisecond)))
	}
	s.mustHold(t, l, renewed, "after the first ttl passed, following a Renew with a longer ttl")
	again, _ := s.renew(t, l, renewed, long)
	s.mustHold(t, l, again, "after a second Renew")
}

// releaseFreesName: release frees the name for another owner at once.
func releaseFreesName(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("release")
	held, _ := s.acquire(t, l, name, "owner-a", long)
	if err := l.Release(t.Context(), held); err != nil {
		t.Fatalf("Release of an intact tenure: %v", err)
	}
	s.mustBeFree(t, l, name, "after Release")
	next, _ := s.acquire(t, l, name, "owner-b", long)
	if next.Token <= held.Token {
		t.Fatalf("Acquire after Release got token %d, not greater than the released tenure's %d", next.Token, held.Token)
	}
}

// releaseElsewhereFreesName: a locker told the name is held acquires it
// at once after another locker releases it. A backend may remember who
// holds a name to spare the store work (the SQL backend on MySQL reads
// before it writes, etcd reads before it writes), but never answers from
// that memory once the tenure has ended elsewhere.
func releaseElsewhereFreesName(t testing.TB, s *suite) {
	holder, other := s.locker(t), s.locker(t)
	name := s.name("release-elsewhere")
	held, _ := s.acquire(t, holder, name, "owner-a", long)
	for i := range 2 {
		_, err := other.Acquire(t.Context(), name, "owner-b", long)
		s.mustBeHeld(t, fmt.Sprintf("Acquire %d by owner-b on another Locker", i+1), err, name, "owner-a", long)
	}
	if err := holder.Release(t.Context(), held); err != nil {
		t.Fatalf("Release of an intact tenure: %v", err)
	}
	next, _ := s.acquire(t, other, name, "owner-b", long)
	if next.Token <= held.Token {
		t.Fatalf("Acquire after a Release on another Locker got token %d, not greater than the released tenure's %d", next.Token, held.Token)
	}
}

// releaseThenReacquire: release then re-acquire by the same owner gets a larger token.
func releaseThenReacquire(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("release-reacquire")
	held, _ := s.acquire(t, l, name, "owner-a", long)
	if err := l.Release(t.Context(), held); err != nil {
		t.Fatalf("Release of an intact tenure: %v", err)
	}
	next, _ := s.acquire(t, l, name, "owner-a", long)
	if next.Token <= held.Token {
		t.Fatalf("a new tenure after Release got token %d, not greater than the released tenure's %d", next.Token, held.Token)
	}
}

// releasedLeaseIsLost: released lease cannot be renewed or released again.
func releasedLeaseIsLost(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("released-stale")
	held, _ := s.acquire(t, l, name, "owner-a", long)
	if err := l.Release(t.Context(), held); err != nil {
		t.Fatalf("Release of an intact tenure: %v", err)
	}
	err := l.Release(t.Context(), held)
	mustBeLost(t, "a second Release of the same tenure", err)
	_, err = l.Renew(t.Context(), held, long)
	mustBeLost(t, "Renew of a released tenure", err)
	s.mustBeFree(t, l, name, "after Renew of a released tenure")
}

// oldOwnerCannotRenewAfterTakeover: stale owner cannot renew after takeover.
func oldOwnerCannotRenewAfterTakeover(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("stale-renew-takeover")
	old, granted := s.acquire(t, l, name, "owner-a", s.h.TTL)
	s.expire(t, l, name, s.h.TTL, granted)
	cur, _ := s.acquire(t, l, name, "owner-b", long)
	_, err := l.Renew(t.Context(), old, long)
	mustBeLost(t, "Renew by the owner whose tenure was taken over", err)
	s.mustHold(t, l, cur, "after the stale Renew")
}

// oldOwnerCannotReleaseAfterTakeover: stale owner cannot release after takeover.
func oldOwnerCannotReleaseAfterTakeover(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("stale-release-takeover")
	old, granted := s.acquire(t, l, name, "owner-a", s.h.TTL)
	s.expire(t, l, name, s.h.TTL, granted)
	cur, _ := s.acquire(t, l, name, "owner-b", long)
	err := l.Release(t.Context(), old)
	mustBeLost(t, "Release by the owner whose tenure was taken over", err)
	s.mustHold(t, l, cur, "after the stale Release")
}

// oldTenureOfSameOwnerIsLost: stale owner cannot renew or release after its own re-acquire started a new tenure.
func oldTenureOfSameOwnerIsLost(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("stale-same-owner")
	old, granted := s.acquire(t, l, name, "owner-a", s.h.TTL)
	s.expire(t, l, name, s.h.TTL, granted)
	cur, _ := s.acquire(t, l, name, "owner-a", long)
	_, err := l.Renew(t.Context(), old, long)
	mustBeLost(t, "Renew with the token of the owner's expired tenure", err)
	err = l.Release(t.Context(), old)
	mustBeLost(t, "Release with the token of the owner's expired tenure", err)
	s.mustHold(t, l, cur, "after the stale Renew and Release")
}

// oldOwnerCannotRenewAfterExpiry: stale owner cannot renew after plain expiry.
func oldOwnerCannotRenewAfterExpiry(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("stale-renew-expired")
	old, granted := s.acquire(t, l, name, "owner-a", s.h.TTL)
	s.expire(t, l, name, s.h.TTL, granted)
	_, err := l.Renew(t.Context(), old, long)
	mustBeLost(t, "Renew of an expired tenure", err)
	s.mustBeFree(t, l, name, "after Renew of an expired tenure (it must not be revived)")
	next, _ := s.acquire(t, l, name, "owner-b", long)
	if next.Token <= old.Token {
		t.Fatalf("Acquire after expiry got token %d, not greater than %d", next.Token, old.Token)
	}
}

// oldOwnerCannotReleaseAfterExpiry: stale owner cannot release after plain expiry.
func oldOwnerCannotReleaseAfterExpiry(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("stale-release-expired")
	old, granted := s.acquire(t, l, name, "owner-a", s.h.TTL)
	s.expire(t, l, name, s.h.TTL, granted)
	err := l.Release(t.Context(), old)
	mustBeLost(t, "Release of an expired tenure", err)
	s.mustBeFree(t, l, name, "after Release of an expired tenure")
}

// forgedLeaseIsLost: renew and release check owner and token, not just the name.
func forgedLeaseIsLost(t testing.TB, s *suite) {
	l := s.locker(t)
	name := s.name("forged")
	held, _ := s.acquire(t, l, name, "owner-a", long)
	forged := []struct {
		what string
		l    lease.Lease
	}{
		{"another owner with the holder's token", lease.Lease{Name: name, Owner: "owner-b", Token: held.Token}},
		{"the holder with a larger token", lease.Lease{Name: name, Owner: held.Owner, Token: held.Token + 1}},
		{"the holder with a smaller token", lease.Lease{Name: name, Owner: held.Owner, Token: held.Token - 1}},
	}
	for _, f := range forged {
		if f.l.Token == 0 {
			continue
		}
		_, err := l.Renew(t.Context(), f.l, long)
		mustBeLost(t, "Renew by "+f.what, err)
		err = l.Release(t.Context(), f.l)
		mustBeLost(t, "Release by "+f.what, err)
	}
	s.mustHold(t, l, held, "after forged Renew and Release calls")
}

// shorterTTLEndsSooner: renew and re-acquire with a shorter ttl end the tenure sooner.
func shorterTTLEndsSooner(t testing.TB, s *suite) {
	l := s.locker(t)
	ctx := t.Context()
	for _, how := range []string{"Renew", "Acquire"} {
		name := s.name("shorter-" + how)
		held, _ := s.acquire(t, l, name, "owner-a", long)
		var granted time.Time
		if how == "Renew" {
			_, granted = s.renew(t, l, held, s.h.TTL)
		} else {
			var again lease.Lease
			again, granted = s.acquire(t, l, name, "owner-a", s.h.TTL)
			if again.Token != held.Token {
				t.Fatalf("re-entrant Acquire with a shorter ttl changed the token from %d to %d", held.Token, again.Token)
			}
		}
		// "now+ttl" holds both ways: the tenure must end one short ttl
		// after the call, not keep the longer expiry it had.
		s.expire(t, l, name, s.h.TTL, granted)
		if _, err := l.Renew(ctx, held, long); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("Renew after the shortened tenure expired: got %v, want ErrLost", err)
		}
	}
}

// batchRenewMatchesRenew: a batch of renewals mixing intact, expired,
// released, taken-over and forged tenures gives each exactly the answer a
// single Renew would, and changes only the intact ones.
func batchRenewMatchesRenew(t testing.TB, s *suite) {
	l := s.locker(t)
	br := batchRenewer(t, l)
	ctx := t.Context()
	intact, _ := s.acquire(t, l, s.name("batch-intact"), "owner-a", long)
	released, _ := s.acquire(t, l, s.name("batch-released"), "owner-a", long)
	if err := l.Release(ctx, released); err != nil {
		failCall(t, "Release", err)
	}
	expiredName, takenName := s.name("batch-expired"), s.name("batch-taken")
	expired, granted := s.acquire(t, l, expiredName, "owner-a", s.h.TTL)
	taken, takenGranted := s.acquire(t, l, takenName, "owner-a", s.h.TTL)
	s.expire(t, l, expiredName, s.h.TTL, granted)
	// From its own grant: a second Acquire that came back late would
	// still be held at the first one's expiry.
	s.expire(t, l, takenName, s.h.TTL, takenGranted)
	taker, _ := s.acquire(t, l, takenName, "owner-b", long)
	forged := intact
	forged.Token++

	reqs := []renewReq{
		{Lease: intact, TTL: long},
		{Lease: expired, TTL: long},
		{Lease: released, TTL: long},
		{Lease: taken, TTL: long},
		{Lease: forged, TTL: long},
		{Lease: lease.Lease{}, TTL: long},
		{Lease: intact, TTL: 0},
	}
	start := time.Now()
	res := renewBatch(t, ctx, br, reqs)
	done := time.Now()
	if len(res) != len(reqs) {
		t.Fatalf("RenewBatch returned %d results for %d requests", len(res), len(reqs))
	}
	if res[0].Err != nil {
		failCall(t, "RenewBatch of an intact tenure", res[0].Err)
	}
	s.checkLease(t, "RenewBatch", res[0].Lease, intact.Name, intact.Owner, long, start, done)
	if res[0].Lease.Token != intact.Token {
		t.Fatalf("RenewBatch changed the token from %d to %d", intact.Token, res[0].Lease.Token)
	}
	for i, what := range []string{"", "an expired tenure", "a released tenure", "a taken-over tenure", "a forged token"} {
		if i > 0 {
			mustBeLost(t, "RenewBatch of "+what, res[i].Err)
		}
	}
	mustBeInvalid(t, "RenewBatch of the zero Lease", res[5].Err, "Lease")
	mustBeInvalid(t, "RenewBatch with ttl 0", res[6].Err, "ttl")
	// A batch of one lost tenure, as lease.Run's renewer sends for one
	// Run, answers lost too.
	one := renewBatch(t, ctx, br, []renewReq{{Lease: released, TTL: long}})
	if len(one) != 1 {
		t.Fatalf("RenewBatch returned %d results for 1 request", len(one))
	}
	mustBeLost(t, "RenewBatch of one released tenure", one[0].Err)
	s.mustHold(t, l, res[0].Lease, "after RenewBatch")
	s.mustBeFree(t, l, expiredName, "after RenewBatch of an expired tenure (it must not be revived)")
	s.mustBeFree(t, l, released.Name, "after RenewBatch of a released tenure")
	s.mustHold(t, l, taker, "after RenewBatch of the tenure it took over")
}

// partOfABurstRenewed: tenures acquired at the same moment are separate
// tenures. While some of them are renewed (by RenewBatch when the Locker
// has it, and by Renew), the others expire at their own time, and those
// renewed are still held. A store that shares one expiry among tenures
// acquired together (etcd puts the tenures of a burst on one etcd lease)
// must not extend the others when it renews some.
func partOfABurstRenewed(t testing.TB, s *suite) {
	l := s.locker(t)
	const n = 12
	ttl := s.h.TTL
	held := make([]lease.Lease, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			held[i], errs[i] = l.Acquire(t.Context(), s.name(fmt.Sprintf("burst-%d", i)), "owner-a", ttl)
		})
	}
	wg.Wait()
	granted := time.Now()
	for _, err := range errs {
		if err != nil {
			failCall(t, "Acquire of one of a burst", err)
		}
	}
	batch, _ := l.(batcher)
	renewed, idle := held[:n/2], held[n/2:]
	renewSome := func() {
		t.Helper()
		if batch != nil {
			reqs := make([]renewReq, n/4)
			for i := range reqs {
				reqs[i] = renewReq{Lease: renewed[i], TTL: ttl}
			}
			res := renewBatch(t, t.Context(), batch, reqs)
			answered := time.Now()
			for i, r := range res {
				if r.Err != nil {
					s.lateLost(t, "RenewBatch of part of a burst", renewed[i], ttl, answered, r.Err)
					failCall(t, "RenewBatch of part of a burst", r.Err)
				}
				renewed[i] = r.Lease
			}
		}
		for i := range renewed {
			if batch != nil && i < n/4 {
				continue
			}
			got, err := l.Renew(t.Context(), renewed[i], ttl)
			if err != nil {
				s.lateLost(t, "Renew of one of a burst", renewed[i], ttl, time.Now(), err)
				failCall(t, "Renew of one of a burst", err)
			}
			renewed[i] = got
		}
	}
	// Renew some every third of the ttl until the others have had time
	// to expire: bounded by their ttl, the store's granularity and its
	// expiry lag.
	free := func() bool {
		for _, h := range idle {
			if _, ok := s.inspect(t, l, h.Name); ok {
				return false
			}
		}
		return true
	}
	steps := int((ttl+s.h.Granularity+s.h.ExpiryLag)/(ttl/3)) + 2
	for step := 0; ; step++ {
		s.pass(ttl / 3)
		renewSome()
		if free() {
			break
		}
		if step >= steps || (s.h.Advance == nil && time.Since(granted) > ttl+s.h.Granularity+s.h.ExpiryLag+time.Second) {
			t.Fatalf("tenures acquired together with others that were renewed were still held %s after their grant (ttl %s, Granularity %s, ExpiryLag %s): renewing some extended the others", time.Since(granted).Round(time.Millisecond), ttl, s.h.Granularity, s.h.ExpiryLag)
		}
	}
	// Looking at the idle tenures took round trips after the last
	// renewal: renew once more, and judge a renewed tenure that is not
	// held by when the look came back. After its Deadline, the machine or
	// the store was too slow to tell; before it, the store broke the
	// promise.
	renewSome()
	for _, h := range renewed {
		if _, ok := s.inspect(t, l, h.Name); !ok && time.Now().After(h.Deadline) {
			couldNotTest(t, "Inspect of a renewed tenure of a burst answered %s after its Deadline (ttl %s): the machine or the store was too slow for this ttl; use a longer Harness.TTL",
				time.Since(h.Deadline).Round(time.Millisecond), ttl)
		}
		s.mustHold(t, l, h, "after the tenures acquired with it expired")
	}
}
