package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// Waiting for a turn (lease.TurnWaiter), where a store wakes one waiting
// Locker per release.

// turner returns l as a TurnWaiter with a turn Watch on name, or skips t
// when the store cannot wake one Locker.
func (s *suite) turner(t testing.TB, l lease.Locker, name string) (lease.TurnWaiter, lease.Watch) {
	t.Helper()
	tw, ok := l.(lease.TurnWaiter)
	if !ok {
		t.Skip("the Locker does not implement lease.TurnWaiter")
	}
	w, err := tw.WatchTurn(t.Context(), name)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip("the store cannot wake one Locker: ", err)
	}
	if err != nil {
		failCall(t, "WatchTurn", err)
	}
	t.Cleanup(w.Stop)
	return tw, w
}

// waitTurn calls AcquireOrWait and fails t unless another owner holds
// name: the Locker's mark is placed or renewed.
func waitTurn(t testing.TB, tw lease.TurnWaiter, name, owner string) {
	t.Helper()
	_, err := tw.AcquireOrWait(t.Context(), name, owner, long)
	if !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("AcquireOrWait(%q, %q) while another owner holds it: %v, want ErrHeld", name, owner, err)
	}
}

// takeTurn calls AcquireOrWait and fails t unless it acquires name.
func takeTurn(t testing.TB, tw lease.TurnWaiter, name, owner string) lease.Lease {
	t.Helper()
	got, err := tw.AcquireOrWait(t.Context(), name, owner, long)
	if err != nil {
		failCall(t, "AcquireOrWait", err)
	}
	if got.Owner != owner || got.Name != name {
		t.Fatalf("AcquireOrWait(%q, %q) returned a lease of %q owned by %q", name, owner, got.Name, got.Owner)
	}
	return got
}

// drain empties w's channel: an Acquire may wake a watch too, and only
// what follows a release counts.
func drain(w lease.Watch) {
	for {
		select {
		case <-w.Changed():
		default:
			return
		}
	}
}

// turnQuiet is how long a turn Watch that a release did not choose is
// watched for a wake-up it must not get.
const turnQuiet = 300 * time.Millisecond

// woken fails t unless w wakes within 5s (plus the store's expiry lag).
func (s *suite) woken(t testing.TB, w lease.Watch, who, what string) {
	t.Helper()
	select {
	case <-w.Changed():
	case <-time.After(5*time.Second + s.h.ExpiryLag):
		t.Fatalf("%s was not woken within 5s of %s", who, what)
	}
}

// quiet fails t if w wakes within turnQuiet.
func quiet(t testing.TB, w lease.Watch, who, what string) {
	t.Helper()
	select {
	case <-w.Changed():
		t.Fatalf("%s was woken by %s, which chose another Locker", who, what)
	case <-time.After(turnQuiet):
	}
}

// turnWakesOldestMark: with two Lockers waiting, each release (plain or
// forced) wakes the one whose mark is older and not the other; the
// Locker that acquires loses its mark, so the next release wakes the
// other; a Locker whose last turn Watch stopped loses its mark too.
func turnWakesOldestMark(t testing.TB, s *suite) {
	ctx := t.Context()
	name := s.name("turn")
	holder, a, b := s.locker(t), s.locker(t), s.locker(t)
	twA, wA := s.turner(t, a, name)
	twB, wB := s.turner(t, b, name)
	held, _ := s.acquire(t, holder, name, "holder", long)
	waitTurn(t, twA, name, "waiter-a")
	waitTurn(t, twB, name, "waiter-b")
	waitTurn(t, twA, name, "waiter-a") // renewing a mark keeps its place
	drain(wA)
	drain(wB)
	if err := holder.Release(ctx, held); err != nil {
		failCall(t, "Release", err)
	}
	s.woken(t, wA, "the Locker with the oldest mark", "a Release")
	quiet(t, wB, "the Locker with the newer mark", "a Release")

	gotA := takeTurn(t, twA, name, "waiter-a") // a's mark goes
	drain(wA)
	drain(wB)
	if err := a.Release(ctx, gotA); err != nil {
		failCall(t, "Release", err)
	}
	s.woken(t, wB, "the only Locker with a mark", "a Release by the Locker that took its turn")
	quiet(t, wA, "a Locker whose mark went when it acquired", "that Release")

	if fr, ok := holder.(lease.ForceReleaser); ok {
		// b waits again behind a new mark of a; a force-release wakes b.
		s.acquire(t, holder, name, "holder", long)
		waitTurn(t, twB, name, "waiter-b")
		waitTurn(t, twA, name, "waiter-a")
		drain(wA)
		drain(wB)
		if _, err := fr.ForceRelease(ctx, name); err == nil {
			s.woken(t, wB, "the Locker with the oldest mark", "a ForceRelease")
			quiet(t, wA, "the Locker with the newer mark", "a ForceRelease")
		} else if !errors.Is(err, errors.ErrUnsupported) {
			failCall(t, "ForceRelease", err)
		}
	} else {
		held, _ = s.acquire(t, holder, name, "holder", long)
		waitTurn(t, twB, name, "waiter-b")
		waitTurn(t, twA, name, "waiter-a")
		if err := holder.Release(ctx, held); err != nil {
			failCall(t, "Release", err)
		}
	}
	// b stops waiting (its only turn Watch stops, which takes its mark
	// away): the next release wakes a.
	wB.Stop()
	held, _ = s.acquire(t, holder, name, "holder", long)
	waitTurn(t, twA, name, "waiter-a")
	drain(wA)
	if err := holder.Release(ctx, held); err != nil {
		failCall(t, "Release", err)
	}
	s.woken(t, wA, "the Locker left waiting", "a Release after the older waiter stopped")
}

// turnWithoutMarksWakesAll: turn Watches of Lockers that placed no mark
// all wake at a release, as plain Watches do; a plain Watch wakes at a
// release that chose a Locker's mark.
func turnWithoutMarksWakesAll(t testing.TB, s *suite) {
	ctx := t.Context()
	name := s.name("turn-nomark")
	holder, a, b := s.locker(t), s.locker(t), s.locker(t)
	_, wA := s.turner(t, a, name)
	twB, wB := s.turner(t, b, name)
	held, _ := s.acquire(t, holder, name, "holder", long)
	drain(wA)
	drain(wB)
	if err := holder.Release(ctx, held); err != nil {
		failCall(t, "Release", err)
	}
	s.woken(t, wA, "a turn Watch", "a Release with no mark placed")
	s.woken(t, wB, "another turn Watch", "a Release with no mark placed")

	w, ok := holder.(lease.Waiter)
	if !ok {
		return
	}
	plain, err := w.Watch(ctx, name)
	if err != nil {
		failCall(t, "Watch", err)
	}
	defer plain.Stop()
	held, _ = s.acquire(t, holder, name, "holder", long)
	waitTurn(t, twB, name, "waiter-b")
	drain(plain)
	if err := holder.Release(ctx, held); err != nil {
		failCall(t, "Release", err)
	}
	s.woken(t, plain, "a plain Watch", "a Release that chose a Locker's mark")
}

// turnMarkLapses: a mark that its waiter stopped renewing lapses after
// lease.MarkLife, by the store's clock: a release then wakes the Locker
// that kept renewing its own, although its mark is newer. The renewing
// Locker asks every quarter of MarkLife until the other's mark has surely
// lapsed (MarkLife, the Harness's Granularity and ExpiryLag, and a
// margin), so a larger declared lag only makes the case wait longer.
func turnMarkLapses(t testing.TB, s *suite) {
	ctx := t.Context()
	name := s.name("turn-lapse")
	holder, a, b := s.locker(t), s.locker(t), s.locker(t)
	twA, wA := s.turner(t, a, name)
	twB, wB := s.turner(t, b, name)
	held, _ := s.acquire(t, holder, name, "holder", long)
	waitTurn(t, twA, name, "waiter-a")
	markedA := time.Now() // a's mark lapses MarkLife after the store saw this, at the latest
	s.pass(lease.MarkLife / 2)
	lapsed := lease.MarkLife + s.h.Granularity + s.h.ExpiryLag + lease.MarkLife/10
	step := lease.MarkLife / 4
	var asked time.Time // when b's previous ask began
	for waited := lease.MarkLife / 2; ; waited += step {
		start := time.Now()
		waitTurn(t, twB, name, "waiter-b") // b renews its mark
		if gap := time.Since(asked); s.h.Advance == nil && !asked.IsZero() && gap >= lease.MarkLife {
			couldNotTest(t, "waiter-b's asks were answered %s after the one before began, not within MarkLife (%s): its mark may have lapsed too; the machine or the store was too slow",
				gap.Round(time.Millisecond), lease.MarkLife)
		}
		asked = start
		if waited >= lapsed || s.h.Advance == nil && time.Since(markedA) >= lapsed {
			break
		}
		s.pass(step)
	}
	drain(wA)
	drain(wB)
	if err := holder.Release(ctx, held); err != nil {
		failCall(t, "Release", err)
	}
	s.woken(t, wB, "the Locker whose mark is live", "a Release after the older mark lapsed")
	quiet(t, wA, "the Locker whose mark lapsed", "that Release")
}

// turnPassesOn: when the Locker a release chose stops waiting instead of
// acquiring, the next waiter (a Run on another Locker) still gets the
// name within Run's fallback, not at the holder's old expiry or the
// mark's lapse: a store may pass the turn on at once (Redis does) or
// leave the next waiter to try again on its own.
func turnPassesOn(t testing.TB, s *suite) {
	ctx := t.Context()
	name := s.name("turn-pass")
	holder, a, b := s.locker(t), s.locker(t), s.locker(t)
	twA, wA := s.turner(t, a, name)
	held, _ := s.acquire(t, holder, name, "holder", long)
	waitTurn(t, twA, name, "waiter-a")
	entered := make(chan time.Time, 1)
	done := make(chan error, 1)
	go func() {
		done <- lease.Run(ctx, b, name, long, func(context.Context) error {
			entered <- time.Now()
			return nil
		}, lease.WithWait(long), lease.WithOwner("waiter-b"))
	}()
	time.Sleep(turnQuiet) // b's first attempt finds the name held and marks
	drain(wA)
	if err := holder.Release(ctx, held); err != nil {
		failCall(t, "Release", err)
	}
	s.woken(t, wA, "the Locker with the oldest mark", "a Release")
	wA.Stop() // a gives up its turn
	stopped := time.Now()
	var at time.Time
	select {
	case at = <-entered:
	case err := <-done:
		// Run sends on entered before it returns, so a Run that got the
		// name has sent already: both may be ready when the select runs.
		select {
		case at = <-entered:
			done <- err
		default:
			t.Fatalf("the next waiter's Run returned %v without getting the name", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next waiter did not get the name within 10s of the chosen one giving up")
	}
	if d := at.Sub(stopped); d > 4*time.Second {
		t.Errorf("the next waiter got the name %s after the chosen one gave up; want within Run's fallback (2s)", d)
	}
	if err := <-done; err != nil {
		t.Fatalf("the next waiter's Run: %v", err)
	}
}
