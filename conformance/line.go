package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/line"
)

// The line of waiters, where a store keeps one (driver.TurnWatcher): a
// release wakes the waiting Locker whose mark is oldest, and a fair
// waiter takes a free name only at its turn. The cases wait as lease.Run
// does: each attempt is an Acquire whose context carries the waiter's
// place (a line.Wait), so they go through the Locker's Acquire.

// lineRetry is how often the suite's waiters would retry: their marks
// last three of these, longer than any case's steps between two asks.
const lineRetry = time.Second

// waiter is one Locker's waiting for one name.
type waiter struct {
	l    lease.Locker
	w    *line.Wait
	name string
}

// waiter starts l's waiting for name, ended when t ends; the first ask
// skips t when the store keeps no line.
func (s *suite) waiter(t testing.TB, l lease.Locker, name string, fair bool, retry time.Duration) *waiter {
	t.Helper()
	w := line.New(fair, retry)
	t.Cleanup(func() { w.Done(false) })
	return &waiter{l: l, w: w, name: name}
}

// ask is one waiting Acquire of the name by owner for long.
func (wt *waiter) ask(t testing.TB, owner string) (lease.Lease, error) {
	t.Helper()
	got, err := wt.l.Acquire(line.NewContext(t.Context(), wt.w), wt.name, owner, long)
	if !wt.w.Taken() {
		if errors.Is(err, errors.ErrUnsupported) || err == nil || errors.Is(err, lease.ErrHeld) {
			if err == nil {
				_ = wt.l.Release(t.Context(), got)
			}
			t.Skip("the store keeps no line of waiters: ", err)
		}
		failCall(t, "a waiting Acquire", err)
	}
	return got, err
}

// changed receives when the waiter's turn may have come.
func (wt *waiter) changed() <-chan struct{} { return wt.w.Changed() }

// stop ends the waiting, having acquired or not (as Run ends it).
func (wt *waiter) stop(acquired bool) { wt.w.Done(acquired) }

// waitTurn asks and fails t unless the name is not given: held by
// another owner (want non-empty: by want), or free with a waiter ahead
// (want empty).
func waitTurn(t testing.TB, wt *waiter, owner, want string) {
	t.Helper()
	_, err := wt.ask(t, owner)
	var he *lease.HeldError
	if !errors.As(err, &he) {
		if err == nil {
			t.Fatalf("the waiting Acquire of %q by %s succeeded; want it to wait (for %q)", wt.name, owner, want)
		}
		failCall(t, "a waiting Acquire by "+owner, err)
	}
	if he.Owner != want {
		if want == "" {
			t.Fatalf("the waiting Acquire of %q by %s was told the name is held by %q; want it free with another waiter first in line (HeldError.Owner empty)", wt.name, owner, he.Owner)
		}
		t.Fatalf("the waiting Acquire of %q by %s was told to wait for %q; want %q", wt.name, owner, he.Owner, want)
	}
}

// takeTurn asks and fails t unless it acquires the name.
func takeTurn(t testing.TB, wt *waiter, owner string) lease.Lease {
	t.Helper()
	got, err := wt.ask(t, owner)
	if err != nil {
		failCall(t, "a waiting Acquire by "+owner+" at its turn", err)
	}
	if got.Owner != owner || got.Name != wt.name {
		t.Fatalf("the waiting Acquire of %q by %s returned a lease of %q owned by %q", wt.name, owner, got.Name, got.Owner)
	}
	return got
}

// drain empties a wake-up channel: an Acquire may wake a watch too, and
// only what follows a release counts.
func drain(c <-chan struct{}) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

// turnQuiet is how long a waiter that a release did not choose is
// watched for a wake-up it must not get.
const turnQuiet = 300 * time.Millisecond

// woken fails t unless c receives within 5s (plus the store's expiry
// lag).
func (s *suite) woken(t testing.TB, c <-chan struct{}, who, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(5*time.Second + s.h.ExpiryLag):
		t.Fatalf("%s was not woken within 5s of %s", who, what)
	}
}

// quiet fails t if c receives within turnQuiet.
func quiet(t testing.TB, c <-chan struct{}, who, what string) {
	t.Helper()
	select {
	case <-c:
		t.Fatalf("%s was woken by %s, which chose another Locker", who, what)
	case <-time.After(turnQuiet):
	}
}

// release releases l's tenure held, failing t on an error.
func release(t testing.TB, l lease.Locker, held lease.Lease) {
	t.Helper()
	if err := l.Release(t.Context(), held); err != nil {
		failCall(t, "Release", err)
	}
}

// turnWakesOldestMark: with two Lockers waiting, each release (plain or
// forced) wakes the one whose mark is older and not the other; the
// Locker that acquires loses its mark, so the next release wakes the
// other; a Locker that stops waiting loses its mark too.
func turnWakesOldestMark(t testing.TB, s *suite) {
	ctx := t.Context()
	name := s.name("turn")
	holder, a, b := s.locker(t), s.locker(t), s.locker(t)
	wA := s.waiter(t, a, name, false, lineRetry)
	wB := s.waiter(t, b, name, false, lineRetry)
	held, _ := s.acquire(t, holder, name, "holder", long)
	waitTurn(t, wA, "waiter-a", "holder")
	waitTurn(t, wB, "waiter-b", "holder")
	waitTurn(t, wA, "waiter-a", "holder") // renewing a mark keeps its place
	drain(wA.changed())
	drain(wB.changed())
	release(t, holder, held)
	s.woken(t, wA.changed(), "the Locker with the oldest mark", "a Release")
	quiet(t, wB.changed(), "the Locker with the newer mark", "a Release")

	gotA := takeTurn(t, wA, "waiter-a") // a's mark goes
	wA.stop(true)
	drain(wB.changed())
	release(t, a, gotA)
	s.woken(t, wB.changed(), "the only Locker with a mark", "a Release by the Locker that took its turn")

	// b waits behind a new mark of a; a release (forced, where the Locker
	// can) wakes b and not a.
	wA = s.waiter(t, a, name, false, lineRetry)
	held, _ = s.acquire(t, holder, name, "holder", long)
	waitTurn(t, wB, "waiter-b", "holder")
	waitTurn(t, wA, "waiter-a", "holder")
	drain(wA.changed())
	drain(wB.changed())
	what := "a Release"
	if fr, ok := holder.(lease.ForceReleaser); ok {
		what = "a ForceRelease"
		if _, err := fr.ForceRelease(ctx, name); errors.Is(err, errors.ErrUnsupported) {
			what = "a Release"
			release(t, holder, held)
		} else if err != nil {
			failCall(t, "ForceRelease", err)
		}
	} else {
		release(t, holder, held)
	}
	s.woken(t, wB.changed(), "the Locker with the oldest mark", what)
	quiet(t, wA.changed(), "the Locker with the newer mark", what)

	// b stops waiting, which takes its mark away: the next release wakes a.
	wB.stop(false)
	held, _ = s.acquire(t, holder, name, "holder", long)
	waitTurn(t, wA, "waiter-a", "holder")
	drain(wA.changed())
	release(t, holder, held)
	s.woken(t, wA.changed(), "the Locker left waiting", "a Release after the older waiter stopped")
}

// turnWithoutMarksWakesAll: waiting Lockers that have no mark in the
// line (their one attempt acquired, which placed none) all wake at a
// release, as plain Watches do; and a plain Watch wakes at a release that
// chose a mark.
func turnWithoutMarksWakesAll(t testing.TB, s *suite) {
	ctx := t.Context()
	name := s.name("turn-nomark")
	holder, a, b := s.locker(t), s.locker(t), s.locker(t)
	// Each waiter's first attempt acquires, which places no mark; its
	// wait goes on, and with it its turn watch.
	wA := s.waiter(t, a, name, false, lineRetry)
	gotA := takeTurn(t, wA, "waiter-a")
	release(t, a, gotA)
	wB := s.waiter(t, b, name, false, lineRetry)
	gotB := takeTurn(t, wB, "waiter-b")
	release(t, b, gotB)
	held, _ := s.acquire(t, holder, name, "holder", long)
	drain(wA.changed())
	drain(wB.changed())
	release(t, holder, held)
	s.woken(t, wA.changed(), "a waiter without a mark", "a Release with no mark placed")
	s.woken(t, wB.changed(), "another waiter without a mark", "a Release with no mark placed")

	w, ok := holder.(driver.Watcher)
	if !ok {
		return
	}
	plain, err := w.Watch(ctx, name)
	if errors.Is(err, errors.ErrUnsupported) {
		return
	}
	if err != nil {
		failCall(t, "Watch", err)
	}
	defer plain.Stop()
	held, _ = s.acquire(t, holder, name, "holder", long)
	waitTurn(t, wB, "waiter-b", "holder")
	drain(plain.Changed())
	release(t, holder, held)
	s.woken(t, plain.Changed(), "a plain Watch", "a Release that chose a Locker's mark")
}

// turnMarkLapses: a mark that its waiter stopped renewing lapses after
// its life (three of the waiter's retries), by the store's clock: a
// release then wakes the Locker that kept renewing its own, although its
// mark is newer. The renewing Locker asks every quarter of the life until
// the other's mark has surely lapsed (the life, the Harness's Granularity
// and ExpiryLag, and a margin), so a larger declared lag only makes the
// case wait longer.
func turnMarkLapses(t testing.TB, s *suite) {
	name := s.name("turn-lapse")
	holder, a, b := s.locker(t), s.locker(t), s.locker(t)
	retry := max(s.h.TTL/4, 100*time.Millisecond)
	wA := s.waiter(t, a, name, false, retry)
	wB := s.waiter(t, b, name, false, retry)
	life := wA.w.Life()
	held, _ := s.acquire(t, holder, name, "holder", long)
	waitTurn(t, wA, "waiter-a", "holder")
	markedA := time.Now() // a's mark lapses life after the store saw this, at the latest
	lapsed := life + s.h.Granularity + s.h.ExpiryLag + life/10
	step := life / 4
	var asked time.Time // when b's previous ask began
	for waited := time.Duration(0); ; waited += step {
		start := time.Now()
		waitTurn(t, wB, "waiter-b", "holder") // b renews its mark
		if gap := time.Since(asked); s.h.Advance == nil && !asked.IsZero() && gap >= life {
			couldNotTest(t, "waiter-b's asks were answered %s after the one before began, not within its mark's life (%s): its mark may have lapsed too; the machine or the store was too slow",
				gap.Round(time.Millisecond), life)
		}
		asked = start
		if waited >= lapsed || s.h.Advance == nil && time.Since(markedA) >= lapsed {
			break
		}
		s.pass(step)
	}
	drain(wA.changed())
	drain(wB.changed())
	release(t, holder, held)
	s.woken(t, wB.changed(), "the Locker whose mark is live", "a Release after the older mark lapsed")
	quiet(t, wA.changed(), "the Locker whose mark lapsed", "that Release")
}

// turnPassesOn: when the Locker a release chose gives up instead of
// acquiring, the store passes the turn on at once: the next waiter (a
// Run on another Locker, which would otherwise try again only after a
// quarter of its ttl, up to 2s) gets the name within a second.
func turnPassesOn(t testing.TB, s *suite) {
	ctx := t.Context()
	name := s.name("turn-pass")
	holder, a, b := s.locker(t), s.locker(t), s.locker(t)
	wA := s.waiter(t, a, name, false, lineRetry)
	held, _ := s.acquire(t, holder, name, "holder", long)
	waitTurn(t, wA, "waiter-a", "holder")
	entered := make(chan time.Time, 1)
	done := make(chan error, 1)
	go func() {
		done <- lease.Run(ctx, b, name, long, func(context.Context) error {
			entered <- time.Now()
			return nil
		}, lease.WithWait(long), lease.WithOwner("waiter-b"))
	}()
	time.Sleep(turnQuiet) // b's first attempt finds the name held and marks
	drain(wA.changed())
	release(t, holder, held)
	s.woken(t, wA.changed(), "the Locker with the oldest mark", "a Release")
	wA.stop(false) // a gives up its turn
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
	if d := at.Sub(stopped); d > time.Second {
		t.Errorf("the next waiter got the name %s after the chosen one gave up; want within 1s: the store must pass the turn on (StopWaiting wakes the next mark's waiter)", d)
	}
	if err := <-done; err != nil {
		t.Fatalf("the next waiter's Run: %v", err)
	}
}

// fairLineOrder: fair waiters get a free name in the order they came,
// each with a larger token, whoever asks first once it is free; the later
// ones are told that the name is free but another waiter is first.
func fairLineOrder(t testing.TB, s *suite) {
	name := s.name("fair-order")
	holder := s.locker(t)
	owners := []string{"first", "second", "third"}
	ws := make([]*waiter, len(owners))
	for i := range owners {
		ws[i] = s.waiter(t, s.locker(t), name, true, lineRetry)
	}
	held, _ := s.acquire(t, holder, name, "holder", long)
	for i, o := range owners {
		waitTurn(t, ws[i], o, "holder")
	}
	release(t, holder, held)
	last := held.Token
	for i, o := range owners {
		// The later waiters ask before their turn and are told to wait.
		for j := len(owners) - 1; j > i; j-- {
			waitTurn(t, ws[j], owners[j], "")
		}
		got := takeTurn(t, ws[i], o)
		ws[i].stop(true)
		if got.Token <= last {
			t.Fatalf("the fair waiter %s got token %d at its turn; want above %d", o, got.Token, last)
		}
		last = got.Token
		s.mustHold(t, holder, got, "after the fair Acquire")
		release(t, holder, got)
	}
}

// fairGiveUpAndLapse: a fair waiter that gives up, or that stops asking
// (its mark lapses), no longer holds up the waiters behind it.
func fairGiveUpAndLapse(t testing.TB, s *suite) {
	name := s.name("fair-expire")
	holder := s.locker(t)
	givesUp := s.waiter(t, s.locker(t), name, true, lineRetry)
	dies := s.waiter(t, s.locker(t), name, true, max(s.h.TTL/4, 100*time.Millisecond))
	patient := s.waiter(t, s.locker(t), name, true, lineRetry)
	held, _ := s.acquire(t, holder, name, "holder", long)
	waitTurn(t, givesUp, "gives-up", "holder")
	waitTurn(t, dies, "dies", "holder")
	placed := s.now()
	waitTurn(t, patient, "patient", "holder")
	givesUp.stop(false)
	release(t, holder, held)
	waitTurn(t, patient, "patient", "") // dies is first now
	s.waitPast(placed, dies.w.Life())
	got := takeTurn(t, patient, "patient")
	s.mustHold(t, holder, got, "after the fair Acquire")
}

// fairHolderAndBarger: the holder's own fair Acquire re-enters its tenure
// (same token) and leaves it no place in line, and a plain Acquire of a
// free name does not wait for the line: fairness binds only the waiters
// that wait fairly.
func fairHolderAndBarger(t testing.TB, s *suite) {
	name := s.name("fair-holder")
	l := s.locker(t)
	held, _ := s.acquire(t, l, name, "holder", long)
	self := s.waiter(t, l, name, true, lineRetry)
	again := takeTurn(t, self, "holder")
	self.stop(true)
	if again.Token != held.Token {
		t.Fatalf("the holder's fair Acquire returned token %d; want its own tenure, token %d", again.Token, held.Token)
	}
	release(t, l, again)
	// Had the holder kept a place, the next waiter would be told to wait
	// for it.
	nw := s.waiter(t, s.locker(t), name, true, lineRetry)
	next := takeTurn(t, nw, "next")
	nw.stop(true)
	if next.Token <= held.Token {
		t.Fatalf("the fair Acquire of a free name got token %d; want above %d", next.Token, held.Token)
	}
	ww := s.waiter(t, s.locker(t), name, true, lineRetry)
	waitTurn(t, ww, "waiter", "next")
	release(t, l, next)
	barger, _ := s.acquire(t, l, name, "barger", long)
	if barger.Token <= next.Token {
		t.Fatalf("the plain Acquire ahead of the line got token %d; want above %d", barger.Token, next.Token)
	}
}
