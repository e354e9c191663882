package redislease_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
	"github.com/leasekit/lease/driver"
)

// The fair policy (driver.Mark.Fair) at store level: these tests call the
// store's AcquireOrWait with Marks of their own choosing, on miniredis and
// on the real server in LEASE_TEST_REDIS.

// fairLife is the life of the marks that must not lapse during a test.
const fairLife = 10 * time.Second

// fairMark is a fair Mark of waiter lasting life.
func fairMark(waiter string, life time.Duration) driver.Mark {
	return driver.Mark{Waiter: waiter, Life: life, Fair: true}
}

// fairTry is the store's AcquireOrWait of name for owner with m, failing
// t on an error.
func fairTry(t *testing.T, l *redislease.Locker, name, owner string, m driver.Mark) driver.Tenure {
	t.Helper()
	got, err := redislease.AcquireOrWait(t.Context(), l, name, owner, time.Minute, m)
	if err != nil {
		t.Fatalf("AcquireOrWait(%q, %q, %+v): %v", name, owner, m, err)
	}
	return got
}

// waitServerTime waits until c's server's TIME is past micros (Unix
// microseconds, as the marks' scores are), failing t if it is not within.
func waitServerTime(t *testing.T, c *redis.Client, micros float64, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(5 * time.Millisecond) {
		now, err := c.Time(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if float64(now.UnixMicro()) > micros {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's TIME is %d, not yet past %.0f, %s later", now.UnixMicro(), micros, within)
		}
	}
}

// fairAcquires fails t unless m's waiter, as owner, acquires name, and
// returns its lease.
func fairAcquires(t *testing.T, l *redislease.Locker, name, owner string, m driver.Mark) lease.Lease {
	t.Helper()
	got := fairTry(t, l, name, owner, m)
	if got.Owner != owner || got.Token == 0 {
		t.Fatalf("fair AcquireOrWait by %s (%s) whose turn it is: %+v, want its tenure", owner, m.Waiter, got)
	}
	return lease.Lease{Name: name, Owner: owner, Token: got.Token, Deadline: got.Expires}
}

// fairWaits fails t unless m's waiter is told to wait for a free name: no
// Owner, and a Remaining within (0, most]. It returns the Remaining.
func fairWaits(t *testing.T, l *redislease.Locker, name, owner string, m driver.Mark, most time.Duration) time.Duration {
	t.Helper()
	got := fairTry(t, l, name, owner, m)
	if got.Owner != "" || got.Token != 0 || got.Remaining <= 0 || got.Remaining > most {
		t.Fatalf("fair AcquireOrWait by %s (%s) behind another mark: %+v, want no Owner and a Remaining within (0, %s]", owner, m.Waiter, got, most)
	}
	return got.Remaining
}

// chosenBy runs do while subscribed to name's channel, and returns the
// waiter that the message do published names ("" when it names none).
func chosenBy(t *testing.T, c *redis.Client, prefix, name string, do func()) string {
	t.Helper()
	ctx := t.Context()
	ps := c.Subscribe(ctx, channelOf(prefix, name))
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatalf("subscribing to %s's channel: %v", name, err)
	}
	do()
	for range 10 {
		m, err := ps.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			t.Fatalf("no message on %s's channel: %v", name, err)
		}
		if msg, ok := m.(*redis.Message); ok {
			_, waiter, _ := strings.Cut(msg.Payload, " ")
			return waiter
		}
	}
	t.Fatalf("no message on %s's channel", name)
	return ""
}

// TestFairFollowsTheLine: waiters that each mark a held name from a client
// of their own (as processes would) get it, once it is free, in the order
// they marked it; each release names the waiter that the fair policy then
// lets in, and the policy turns every other waiter away (one EVALSHA,
// acquiring nothing) with the time the first mark has left; a waiter whose
// mark lapsed has lost its place and marks again at the back; with the
// line empty, a release names no one and any waiter gets in.
//
// Not parallel, nor its subtests: waiter 0's mark of 50ms must outlive
// the placing of the five marks after it, each by a Locker of its own
// through a proxy, which other tests' load can make take longer.
func TestFairFollowsTheLine(t *testing.T) {
	watchServersRun(t, false, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		ctx := t.Context()
		c := newClient(t, addr)
		const name = "jobs/fair-line"
		const n = 6
		holder := newLocker(addr)
		held, err := holder.Acquire(ctx, name, "holder", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		p := startProxy(t, addr)
		lockers := make([]*redislease.Locker, n)
		marks := make([]driver.Mark, n)
		owner := func(i int) string { return "owner-" + strconv.Itoa(i) }
		for i := range n {
			lockers[i] = newLocker(p.Addr())
			marks[i] = fairMark("waiter-"+strconv.Itoa(i), fairLife)
		}
		for i := range n {
			if got := fairTry(t, lockers[i], name, owner(i), marks[i]); got.Owner != "holder" {
				t.Fatalf("fair AcquireOrWait of a held name: %+v, want the holder's tenure", got)
			}
		}
		if got := marksOf(t, c, prefix, name); len(got) != n || got[0] != marks[0].Waiter || got[n-1] != marks[n-1].Waiter {
			t.Fatalf("marks after %d waiters: %q, want them in arrival order", n, got)
		}
		// Waiter 0 asks once more with a mark that lasts 50ms (its place
		// kept, its lapse moved): it lapses before the release, whatever
		// the time the six placements took. (Placing it with 50ms first
		// failed on a loaded machine: it lapsed before the others were
		// placed.)
		marks[0].Life = 50 * time.Millisecond
		if got := fairTry(t, lockers[0], name, owner(0), marks[0]); got.Owner != "holder" {
			t.Fatalf("fair AcquireOrWait of a held name: %+v, want the holder's tenure", got)
		}
		// Waiter 0's mark lapses by the server's clock within 100ms.
		waitServerTime(t, c, scoreOf(t, c, prefix, name, ":lapses", marks[0].Waiter), 100*time.Millisecond)
		marks[0].Life = fairLife

		order := []int{1, 2, 3, 4, 5, 0}
		releaseHeld := func() {
			if err := holder.Release(ctx, held); err != nil {
				t.Error(err)
			}
		}
		for round, next := range order {
			if chosen := chosenBy(t, c, prefix, name, releaseHeld); chosen != marks[next].Waiter {
				t.Fatalf("round %d: the release chose %q, want %q", round, chosen, marks[next].Waiter)
			}
			// Every other waiter still in line, last first, is turned away.
			for _, i := range slices.Backward(order[round+1:]) {
				before := len(p.Commands())
				fairWaits(t, lockers[i], name, owner(i), marks[i], fairLife)
				if sent := p.Commands()[before:]; len(sent) != 1 || sent[0] != "evalsha" {
					t.Fatalf("a fair AcquireOrWait turned away sent %q, want one evalsha", sent)
				}
				if got, err := holder.Inspect(ctx, name); !errors.Is(err, lease.ErrNotHeld) {
					t.Fatalf("after a fair AcquireOrWait was turned away: %v, %v; want the name free", got, err)
				}
			}
			if round == 0 {
				// Waiter 0 came back after its mark lapsed: it is last now.
				if got := marksOf(t, c, prefix, name); len(got) != n || got[n-1] != marks[0].Waiter {
					t.Fatalf("marks after a waiter whose mark lapsed came back: %q, want it last", got)
				}
			}
			held = fairAcquires(t, lockers[next], name, owner(next), marks[next])
			holder = lockers[next]
			if slices.Contains(marksOf(t, c, prefix, name), marks[next].Waiter) {
				t.Fatalf("round %d: the waiter that acquired still has a mark", round)
			}
		}
		if chosen := chosenBy(t, c, prefix, name, releaseHeld); chosen != "" {
			t.Fatalf("the release with no mark left chose %q, want no one", chosen)
		}
		got := fairAcquires(t, lockers[3], name, "late", fairMark("late", fairLife))
		if err := lockers[3].Release(ctx, got); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFairStopWaitingPassesTheTurn: a waiter that a release chose and that
// gives up passes the turn to the waiter the fair policy lets in next;
// having no mark any more, it is turned away if it tries again.
func TestFairStopWaitingPassesTheTurn(t *testing.T) {
	t.Parallel()
	eachWatchServer(t, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		ctx := t.Context()
		c := newClient(t, addr)
		const name = "jobs/fair-stop"
		l := newLocker(addr)
		held, err := l.Acquire(ctx, name, "holder", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		a, b := fairMark("waiter-a", fairLife), fairMark("waiter-b", fairLife)
		fairTry(t, l, name, "a", a)
		fairTry(t, l, name, "b", b)
		releaseHeld := func() {
			if err := l.Release(ctx, held); err != nil {
				t.Error(err)
			}
		}
		if chosen := chosenBy(t, c, prefix, name, releaseHeld); chosen != a.Waiter {
			t.Fatalf("the release chose %q, want %q", chosen, a.Waiter)
		}
		fairWaits(t, l, name, "b", b, fairLife)
		passed := chosenBy(t, c, prefix, name, func() {
			if err := redislease.StopWaiting(ctx, l, name, a.Waiter); err != nil {
				t.Error(err)
			}
		})
		if passed != b.Waiter {
			t.Fatalf("StopWaiting of the chosen waiter passed the turn to %q, want %q", passed, b.Waiter)
		}
		fairWaits(t, l, name, "a", a, fairLife)
		fairAcquires(t, l, name, "b", b)
		if got := marksOf(t, c, prefix, name); !slices.Equal(got, []string{a.Waiter}) {
			t.Fatalf("marks after b acquired: %q, want a's, placed again", got)
		}
	})
}

// TestFairHoldsBackOnlyFairWaiters: a plain Acquire, and an AcquireOrWait
// without Fair, of a free name succeed whatever the line; the holder's
// fair AcquireOrWait re-enters its tenure and leaves no mark, or, with
// Keep, goes to the back of the line; a fair waiter first in line gets
// the name with Keep and goes to the back too.
func TestFairHoldsBackOnlyFairWaiters(t *testing.T) {
	t.Parallel()
	eachWatchServer(t, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		ctx := t.Context()
		c := newClient(t, addr)
		const name = "jobs/fair-barge"
		l := newLocker(addr)
		held, err := l.Acquire(ctx, name, "holder", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		a := fairMark("waiter-a", fairLife)
		fairTry(t, l, name, "a", a)
		if err := l.Release(ctx, held); err != nil {
			t.Fatal(err)
		}

		plain, err := l.Acquire(ctx, name, "plain", time.Minute)
		if err != nil || plain.Owner != "plain" {
			t.Fatalf("a plain Acquire of a free name with a mark on it: %v, %v", plain, err)
		}
		again := fairAcquires(t, l, name, "plain", fairMark("holder-waiter", fairLife))
		if again.Token != plain.Token {
			t.Fatalf("the holder's fair AcquireOrWait got token %d, want its own %d", again.Token, plain.Token)
		}
		if got := marksOf(t, c, prefix, name); !slices.Equal(got, []string{a.Waiter}) {
			t.Fatalf("marks after the holder's fair AcquireOrWait: %q, want a's alone", got)
		}
		keep := fairMark("holder-waiter", fairLife)
		keep.Keep = true
		fairAcquires(t, l, name, "plain", keep)
		if got := marksOf(t, c, prefix, name); !slices.Equal(got, []string{a.Waiter, keep.Waiter}) {
			t.Fatalf("marks after the holder's fair AcquireOrWait with Keep: %q, want a's then its own", got)
		}
		if err := l.Release(ctx, plain); err != nil {
			t.Fatal(err)
		}

		unfair := driver.Mark{Waiter: "waiter-c", Life: fairLife}
		got, err := redislease.AcquireOrWait(ctx, l, name, "c", time.Minute, unfair)
		if err != nil || got.Owner != "c" {
			t.Fatalf("an AcquireOrWait without Fair of a free name with marks on it: %+v, %v", got, err)
		}
		if err := l.Release(ctx, lease.Lease{Name: name, Owner: "c", Token: got.Token, Deadline: got.Expires}); err != nil {
			t.Fatal(err)
		}

		a.Keep = true
		mine := fairAcquires(t, l, name, "a", a)
		if got := marksOf(t, c, prefix, name); !slices.Equal(got, []string{keep.Waiter, a.Waiter}) {
			t.Fatalf("marks after the first waiter acquired with Keep: %q, want the other's, then its own", got)
		}
		if err := l.Release(ctx, mine); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFairMarkLivesInMilliseconds: a mark lasts m.Life, rounded up to a
// whole millisecond, by the server's clock, however short; a waiter behind
// is told to the millisecond what the first mark has left, and gets in
// once it lapses; the marks' keys expire with the last mark.
func TestFairMarkLivesInMilliseconds(t *testing.T) {
	t.Parallel()
	_, c, advance := newMiniredis(t) // its TIME and TTLs stand still until advanced
	l := mustNew(t, c)
	defer l.Close()
	ctx := t.Context()
	const name = "jobs/fair-ms"
	marksKeys := []string{keyOf("lease:", name, ":marks"), keyOf("lease:", name, ":lapses")}
	lifeOf := func(waiter string) time.Duration {
		t.Helper()
		return time.Duration(scoreOf(t, c, "lease:", name, ":lapses", waiter)-scoreOf(t, c, "lease:", name, ":marks", waiter)) * time.Microsecond
	}
	held, err := l.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a := fairMark("waiter-a", 1500*time.Microsecond)
	fairTry(t, l, name, "a", a)
	if got := lifeOf(a.Waiter); got != 2*time.Millisecond {
		t.Fatalf("a mark with a Life of %s lapses %s after it was placed, want 2ms", a.Life, got)
	}
	advance(time.Millisecond)
	b := fairMark("waiter-b", 250*time.Millisecond)
	fairTry(t, l, name, "b", b)
	if got := lifeOf(b.Waiter); got != b.Life {
		t.Fatalf("a mark with a Life of %s lapses %s after it was placed", b.Life, got)
	}
	for _, k := range marksKeys {
		if d := c.PTTL(ctx, k).Val(); d != b.Life {
			t.Fatalf("key %s expires in %s, want with the last mark, in %s", k, d, b.Life)
		}
	}
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	if left := fairWaits(t, l, name, "b", b, time.Second); left != time.Millisecond {
		t.Fatalf("b was told to wait %s, want the 1ms the first mark has left", left)
	}
	advance(time.Millisecond)
	got := fairAcquires(t, l, name, "b", b)
	if n := c.Exists(ctx, marksKeys...).Val(); n != 0 {
		t.Fatalf("%d of the marks' keys are left with every mark lapsed or taken away", n)
	}
	// a marks again for 300ms while b holds the name: the keys go when
	// that mark lapses, by the server's clock.
	a.Life = 300 * time.Millisecond
	fairTry(t, l, name, "a", a)
	advance(299 * time.Millisecond)
	if n := c.Exists(ctx, marksKeys...).Val(); n != 2 {
		t.Fatalf("%d of the marks' keys are left a millisecond before the last mark lapses, want 2", n)
	}
	advance(time.Millisecond)
	if n := c.Exists(ctx, marksKeys...).Val(); n != 0 {
		t.Fatalf("%d of the marks' keys outlived the last mark", n)
	}
	if err := l.Release(ctx, got); err != nil {
		t.Fatal(err)
	}
}

// TestFairMarkLivesInMillisecondsOnRedis: on the real server, a mark of
// 100ms holds a fair waiter back until it lapses by Redis's clock, and the
// marks' keys expire with the last mark.
//
// Not parallel: the keys of a mark of 100ms must still be there at the
// PTTL right after it was placed, which other tests' load can delay.
func TestFairMarkLivesInMillisecondsOnRedis(t *testing.T) {
	c, _ := realRedis(t, -1)
	prefix := randomPrefix("fairms")
	deleteKeys(t, c, prefix)
	l := mustNew(t, c, redislease.WithPrefix(prefix))
	defer l.Close()
	ctx := t.Context()
	const name = "jobs/fair-ms"
	marksKeys := []string{keyOf(prefix, name, ":marks"), keyOf(prefix, name, ":lapses")}
	held, err := l.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a, b := fairMark("waiter-a", 100*time.Millisecond), fairMark("waiter-b", 100*time.Millisecond)
	start := time.Now()
	fairTry(t, l, name, "a", a)
	fairTry(t, l, name, "b", b)
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	// b renews its mark each time it is turned away; a's lapses.
	for i := 0; ; i++ {
		got := fairTry(t, l, name, "b", b)
		if got.Owner == "b" {
			if waited := time.Since(start); waited < a.Life {
				t.Fatalf("b got in %s after a marked for %s", waited, a.Life)
			}
			held = lease.Lease{Name: name, Owner: "b", Token: got.Token, Deadline: got.Expires}
			break
		}
		if got.Owner != "" || got.Remaining <= 0 || got.Remaining > a.Life {
			t.Fatalf("b behind a's mark of %s: %+v", a.Life, got)
		}
		if i == 100 {
			t.Fatalf("b is still held back %s after a marked for %s", time.Since(start), a.Life)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// a marks again while b holds the name: the keys go with that mark.
	fairTry(t, l, name, "a", a)
	for _, k := range marksKeys {
		if d := c.PTTL(ctx, k).Val(); d <= 0 || d > a.Life {
			t.Fatalf("key %s expires in %s, want within the mark's %s", k, d, a.Life)
		}
	}
	for deadline := time.Now().Add(a.Life + 50*time.Millisecond); ; time.Sleep(5 * time.Millisecond) {
		n := c.Exists(ctx, marksKeys...).Val()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the marks' keys outlived the last mark", n)
		}
	}
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
}
