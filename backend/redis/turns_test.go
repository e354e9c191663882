package redislease_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/batchtest"
	"github.com/leasekit/lease/internal/faultproxy"
	"github.com/leasekit/lease/internal/linetest"
	"github.com/leasekit/lease/internal/testenv"
	"github.com/leasekit/lease/internal/testserver"
)

// keyOf is the key of name with suffix (":marks", ":lapses", ...) under
// prefix.
func keyOf(prefix, name, suffix string) string {
	sum := sha256.Sum256([]byte(name))
	return prefix + "{" + base64.RawURLEncoding.EncodeToString(sum[:]) + "}" + suffix
}

// marksOf returns the waiter IDs with a mark on name, first placed first.
func marksOf(t *testing.T, c redis.UniversalClient, prefix, name string) []string {
	t.Helper()
	got, err := c.ZRange(t.Context(), keyOf(prefix, name, ":marks"), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// scoreOf returns waiter's score in name's key with suffix, or -1 when it
// has none.
func scoreOf(t *testing.T, c redis.UniversalClient, prefix, name, suffix, waiter string) float64 {
	t.Helper()
	got, err := c.ZScore(t.Context(), keyOf(prefix, name, suffix), waiter).Result()
	if errors.Is(err, redis.Nil) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// newWaiter returns a caller of l that waits for name in l's line of
// waiters (unfair, with linetest's retry), given up when t ends unless it
// was done before. l sets up its turn watch of name at the first
// waiter's first attempt, and wakes the waiter first in its line through
// the waiter's Changed.
func newWaiter(t *testing.T, l *redislease.Locker, name string) *linetest.Waiter {
	t.Helper()
	w := linetest.New(l, name, false, 0)
	t.Cleanup(w.Stop)
	return w
}

// waitTurn is one waiting attempt of w, failing t unless another owner
// holds the name.
func waitTurn(t *testing.T, w *linetest.Waiter, owner string) {
	t.Helper()
	if _, err := w.Acquire(t.Context(), owner, time.Minute); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("waiting Acquire by %q on a held name: %v, want ErrHeld", owner, err)
	}
	if !w.Taken() {
		t.Fatalf("the Locker keeps no line for %q's waiting", owner)
	}
}

// takeTurn is one waiting attempt of w, failing t unless it acquires the
// name. The waiter stays in its Locker's line (with the Locker's turn
// watch) until it is done or t ends.
func takeTurn(t *testing.T, w *linetest.Waiter, owner string) lease.Lease {
	t.Helper()
	got, err := w.Acquire(t.Context(), owner, time.Minute)
	if err != nil || got.Owner != owner {
		t.Fatalf("waiting Acquire by %q on a free name: %v, %v", owner, got, err)
	}
	return got
}

// mustAcquire is Acquire, failing t unless it acquires.
func mustAcquire(t *testing.T, l *redislease.Locker, name, owner string) lease.Lease {
	t.Helper()
	got, err := l.Acquire(t.Context(), name, owner, time.Minute)
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", name, owner, err)
	}
	return got
}

// quietFor fails t if c receives within d (or has received, when d is
// 0): the watch was woken by what must not wake it.
func quietFor(t *testing.T, c <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	if d <= 0 {
		select {
		case <-c:
			t.Fatalf("the watch was woken by %s", what)
		default:
			return
		}
	}
	select {
	case <-c:
		t.Fatalf("the watch was woken by %s", what)
	case <-time.After(d):
	}
}

// turnQuiet is how long a watch that must not wake is watched.
const turnQuiet = 300 * time.Millisecond

// changer is a driver.Watch or a linetest.Waiter.
type changer interface{ Changed() <-chan struct{} }

// drainAll empties the channels of ws.
func drainAll(ws ...changer) {
	for _, w := range ws {
		drain(w.Changed())
	}
}

// TestTurnReleaseWakesOnlyTheOldestMark: of two Lockers waiting with
// marks, a Release wakes only the waiter of the one that marked first,
// and a plain Watch; the Locker that then acquires loses its mark (its
// waiter still in line, with the turn watch), so a ForceRelease wakes the
// other and not it.
func TestTurnReleaseWakesOnlyTheOldestMark(t *testing.T) {
	t.Parallel()
	eachWatchServer(t, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		ctx := t.Context()
		c := newClient(t, addr)
		const name = "jobs/turn"
		holder, a, b := newLocker(addr), newLocker(addr), newLocker(addr)
		wA, wB := newWaiter(t, a, name), newWaiter(t, b, name)
		plain, err := holder.Watch(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Stop()
		held := mustAcquire(t, holder, name, "holder")
		waitTurn(t, wA, "waiter-a")
		waitTurn(t, wB, "waiter-b")
		waitTurn(t, wA, "waiter-a") // renewing keeps a's place
		ids := marksOf(t, c, prefix, name)
		if len(ids) != 2 || len(ids[0]) != 32 || ids[0] == ids[1] {
			t.Fatalf("marks after two waiters: %q, want two waiter IDs", ids)
		}
		drainAll(wA, wB, plain)
		if err := holder.Release(ctx, held); err != nil {
			t.Fatal(err)
		}
		wakeWithin(t, wA.Changed(), 5*time.Second, "a Release that chose its mark")
		wakeWithin(t, plain.Changed(), 5*time.Second, "a Release (plain Watch)")
		quietFor(t, wB.Changed(), turnQuiet, "a Release that chose another Locker's mark")

		gotA := takeTurn(t, wA, "waiter-a")
		if got := marksOf(t, c, prefix, name); !slices.Equal(got, ids[1:]) {
			t.Fatalf("marks after a acquired: %q, want only b's %q", got, ids[1:])
		}
		drainAll(wA, wB, plain)
		if _, err := holder.ForceRelease(ctx, name); err != nil {
			t.Fatal(err)
		}
		wakeWithin(t, wB.Changed(), 5*time.Second, "a ForceRelease that chose its mark")
		wakeWithin(t, plain.Changed(), 5*time.Second, "a ForceRelease (plain Watch)")
		quietFor(t, wA.Changed(), turnQuiet, "a ForceRelease while another Locker has a mark and it has none")
		_ = gotA
	})
}

// TestTurnWaitingMarks: a busy waiting attempt places the Locker's mark
// (one command: the acquire attempt and the mark are one script), lasting
// the waiter's Life, renews its lapse without moving its place, and
// expires both keys with the mark. A second waiter of the same Locker
// asks Redis nothing: it is answered from the first's last answer, and
// not woken by a release that chose the Locker (the first is). The first
// waiter's attempt that acquires removes the mark, or, while the Locker
// has another waiter on the name, moves it to the back (Keep); the
// Locker's last waiter giving up takes it away.
func TestTurnWaitingMarks(t *testing.T) {
	t.Parallel()
	eachWatchServer(t, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		ctx := t.Context()
		c := newClient(t, addr)
		const name = "jobs/marks"
		p := startProxy(t, addr)
		holder, a, b := newLocker(addr), newLocker(p.Addr()), newLocker(addr)
		wA, wA2, wB := newWaiter(t, a, name), newWaiter(t, a, name), newWaiter(t, b, name)
		held := mustAcquire(t, holder, name, "holder")

		waitTurn(t, wA, "waiter-a")
		ids := marksOf(t, c, prefix, name)
		if len(ids) != 1 {
			t.Fatalf("marks after a busy waiting Acquire: %q, want one", ids)
		}
		idA := ids[0]
		placed := scoreOf(t, c, prefix, name, ":marks", idA)
		lapse := scoreOf(t, c, prefix, name, ":lapses", idA)
		// The waiter chooses the mark's life: three of its retries
		// (TestFairMarkLivesInMilliseconds checks the store's side).
		life := time.Duration(lapse-placed) * time.Microsecond
		if life != wA.Life() {
			t.Fatalf("the mark lapses %s after it was placed, want the waiter's Life (%s)", life, wA.Life())
		}
		for _, suffix := range []string{":marks", ":lapses"} {
			if d := c.PTTL(ctx, keyOf(prefix, name, suffix)).Val(); d <= 0 || d > life {
				t.Fatalf("key %s expires in %s, want within the mark's life (%s)", suffix, d, life)
			}
		}

		before := len(p.Commands())
		waitTurn(t, wA, "waiter-a")
		if sent := p.Commands()[before:]; len(sent) != 1 || sent[0] != "evalsha" {
			t.Fatalf("a busy waiting Acquire sent %q, want one evalsha", sent)
		}
		if got := scoreOf(t, c, prefix, name, ":marks", idA); got != placed {
			t.Fatalf("a renewed mark moved from %.0f to %.0f", placed, got)
		}
		if got := scoreOf(t, c, prefix, name, ":lapses", idA); got < lapse {
			t.Fatalf("a renewed mark lapses at %.0f, before %.0f", got, lapse)
		}

		// a's second waiter is behind its first in a's line: only the
		// first asks Redis.
		before = len(p.Commands())
		_, err := wA2.Acquire(ctx, "waiter-a2", time.Minute)
		var he *lease.HeldError
		if !errors.As(err, &he) || he.Owner != "holder" || he.Remaining <= 0 {
			t.Fatalf("the second waiter of a Locker: %v, want the holder's HeldError", err)
		}
		if !wA2.Taken() {
			t.Fatal("the Locker keeps no line for its second waiter")
		}
		if sent := slices.DeleteFunc(p.Commands()[before:], func(c string) bool { return c == "ping" }); len(sent) != 0 {
			t.Fatalf("the second waiter of a Locker sent %q, want nothing", sent)
		}
		if got := marksOf(t, c, prefix, name); !slices.Equal(got, []string{idA}) {
			t.Fatalf("marks after a's second waiter: %q, want a's one mark", got)
		}

		waitTurn(t, wB, "waiter-b")
		idB := marksOf(t, c, prefix, name)[1]
		// a waits with two waiters: when its first acquires, its mark
		// goes to the back, behind b's.
		drainAll(wA, wA2)
		if err := holder.Release(ctx, held); err != nil {
			t.Fatal(err)
		}
		wakeWithin(t, wA.Changed(), 5*time.Second, "a Release that chose its mark")
		quietFor(t, wA2.Changed(), turnQuiet, "a Release that chose its Locker, whose first waiter is another")
		before = len(p.Commands())
		gotA := takeTurn(t, wA, "waiter-a")
		if sent := p.Commands()[before:]; len(sent) != 1 || sent[0] != "evalsha" {
			t.Fatalf("a waiting Acquire that acquired sent %q, want one evalsha", sent)
		}
		if got := marksOf(t, c, prefix, name); !slices.Equal(got, []string{idB, idA}) {
			t.Fatalf("marks after a acquired with another waiter waiting: %q, want b's then a's %q", got, []string{idB, idA})
		}
		wA.Done(true)
		if got := marksOf(t, c, prefix, name); !slices.Equal(got, []string{idB, idA}) {
			t.Fatalf("marks after a's first waiter left with the name: %q, want b's then a's %q", got, []string{idB, idA})
		}
		if err := a.Release(ctx, gotA); err != nil {
			t.Fatal(err)
		}
		gotB := takeTurn(t, wB, "waiter-b")
		wB.Done(true)
		if got := marksOf(t, c, prefix, name); !slices.Equal(got, []string{idA}) {
			t.Fatalf("marks after b acquired: %q, want a's alone", got)
		}
		// a's last waiter gives up: it takes a's mark away, and the keys
		// go with the last mark.
		wA2.Stop()
		for _, suffix := range []string{":marks", ":lapses"} {
			if n := c.Exists(ctx, keyOf(prefix, name, suffix)).Val(); n != 0 {
				t.Fatalf("key %s is left after the last mark was taken away", suffix)
			}
		}
		if err := b.Release(ctx, gotB); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTurnLapsedMarkIsSkipped: a release passes over a mark that lapsed
// by the server's clock, although it was placed first, wakes the Locker
// of the next, and drops the lapsed one.
func TestTurnLapsedMarkIsSkipped(t *testing.T) {
	t.Parallel()
	eachWatchServer(t, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		ctx := t.Context()
		c := newClient(t, addr)
		const name = "jobs/lapse"
		holder, a, b := newLocker(addr), newLocker(addr), newLocker(addr)
		wA, wB := newWaiter(t, a, name), newWaiter(t, b, name)
		held := mustAcquire(t, holder, name, "holder")
		waitTurn(t, wA, "waiter-a")
		waitTurn(t, wB, "waiter-b")
		ids := marksOf(t, c, prefix, name)
		// a's mark lapsed a second ago by the server's clock, as if a
		// stopped renewing it a mark's life ago.
		now, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		past := strconv.FormatInt(now.Add(-time.Second).UnixMicro(), 10)
		if err := c.Do(ctx, "ZADD", keyOf(prefix, name, ":lapses"), "XX", past, ids[0]).Err(); err != nil {
			t.Fatal(err)
		}
		drainAll(wA, wB)
		if err := holder.Release(ctx, held); err != nil {
			t.Fatal(err)
		}
		wakeWithin(t, wB.Changed(), 5*time.Second, "a Release after the older mark lapsed")
		quietFor(t, wA.Changed(), turnQuiet, "a Release after its mark lapsed")
		if got := marksOf(t, c, prefix, name); !slices.Equal(got, ids[1:]) {
			t.Fatalf("marks after the Release: %q, want the lapsed one dropped: %q", got, ids[1:])
		}
		if got := scoreOf(t, c, prefix, name, ":lapses", ids[0]); got != -1 {
			t.Fatalf("the lapsed mark's lapse is still stored")
		}
	})
}

// TestTurnStopWaitingPassesTheTurn: a Locker whose last waiter gives up
// loses its mark (a release then chooses the next); when a release had
// chosen it, its StopWaiting passes the turn on to the next mark.
func TestTurnStopWaitingPassesTheTurn(t *testing.T) {
	t.Parallel()
	eachWatchServer(t, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		ctx := t.Context()
		c := newClient(t, addr)
		const name = "jobs/stop"
		holder, a, b := newLocker(addr), newLocker(addr), newLocker(addr)
		wA, wB := newWaiter(t, a, name), newWaiter(t, b, name)
		held := mustAcquire(t, holder, name, "holder")
		waitTurn(t, wA, "waiter-a")
		waitTurn(t, wB, "waiter-b")
		ids := marksOf(t, c, prefix, name)
		drainAll(wB)
		wA.Stop()
		if got := marksOf(t, c, prefix, name); !slices.Equal(got, ids[1:]) {
			t.Fatalf("marks after a stopped waiting: %q, want b's alone", got)
		}
		quietFor(t, wB.Changed(), turnQuiet, "a StopWaiting while the name is held")

		// a waits again, behind b; the Release chooses b, which gives up:
		// the turn passes to a.
		wA = newWaiter(t, a, name)
		waitTurn(t, wA, "waiter-a")
		drainAll(wA, wB)
		if err := holder.Release(ctx, held); err != nil {
			t.Fatal(err)
		}
		wakeWithin(t, wB.Changed(), 5*time.Second, "a Release that chose its mark")
		quietFor(t, wA.Changed(), turnQuiet, "a Release that chose another Locker's mark")
		wB.Stop()
		wakeWithin(t, wA.Changed(), 5*time.Second, "the chosen Locker giving up its turn")
		if got := marksOf(t, c, prefix, name); !slices.Equal(got, []string{ids[0]}) {
			t.Fatalf("marks after b gave up: %q, want a's alone", got)
		}
		takeTurn(t, wA, "waiter-a")
		wA.Done(true)
	})
}

// TestTurnWithoutMarksWakesAll: with no live mark on the name (the
// waiters' marks gone, as when they lapsed), a release wakes the waiter
// of every Locker with a turn watch, as it wakes every plain Watch.
func TestTurnWithoutMarksWakesAll(t *testing.T) {
	t.Parallel()
	eachWatchServer(t, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		ctx := t.Context()
		c := newClient(t, addr)
		const name = "jobs/nomark"
		holder, a, b := newLocker(addr), newLocker(addr), newLocker(addr)
		wA, wB := newWaiter(t, a, name), newWaiter(t, b, name)
		plain, err := a.Watch(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Stop()
		held := mustAcquire(t, holder, name, "holder")
		// Each waiter's first attempt sets up its Locker's turn watch and
		// places a mark; then the marks go.
		waitTurn(t, wA, "waiter-a")
		waitTurn(t, wB, "waiter-b")
		if err := c.Del(ctx, keyOf(prefix, name, ":marks"), keyOf(prefix, name, ":lapses")).Err(); err != nil {
			t.Fatal(err)
		}
		for i, force := range []bool{false, true} {
			if i > 0 {
				held = mustAcquire(t, holder, name, "holder")
			}
			drainAll(wA, wB, plain)
			if force {
				_, err = holder.ForceRelease(ctx, name)
			} else {
				err = holder.Release(ctx, held)
			}
			if err != nil {
				t.Fatal(err)
			}
			wakeWithin(t, wA.Changed(), 5*time.Second, "a release with no mark")
			wakeWithin(t, wB.Changed(), 5*time.Second, "a release with no mark")
			wakeWithin(t, plain.Changed(), 5*time.Second, "a release")
		}
	})
}

// oldReleaseSrc is release.lua as versions before marks had it: it
// publishes the token alone.
const oldReleaseSrc = `
local cur = redis.call('HMGET', KEYS[1], 'name', 'owner', 'token')
if cur[1] == ARGV[1] and cur[2] == ARGV[2] and cur[3] == ARGV[3] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])
  redis.call('PUBLISH', string.sub(KEYS[1], 1, -7) .. ':free', ARGV[3])
  return 1
end
if redis.call('GET', KEYS[2]) == ARGV[4] then
  return 1
end
return 0`

// TestTurnMessagesOfOtherVersions: in a fleet that mixes versions, a
// release by a version before marks (its message names no waiter) wakes
// the waiter of every Locker with a turn watch, even one whose mark is
// behind another Locker's; the message of a Dequeue by a version with a
// separate fair queue wakes plain Watches but no waiter.
func TestTurnMessagesOfOtherVersions(t *testing.T) {
	t.Parallel()
	eachWatchServer(t, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		ctx := t.Context()
		c := newClient(t, addr)
		const name = "jobs/mixed"
		holder, a, b := newLocker(addr), newLocker(addr), newLocker(addr)
		wA, wB := newWaiter(t, a, name), newWaiter(t, b, name)
		plain, err := b.Watch(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Stop()
		held := mustAcquire(t, holder, name, "holder")
		waitTurn(t, wA, "waiter-a")
		waitTurn(t, wB, "waiter-b")
		drainAll(wA, wB, plain)
		token := strconv.FormatUint(held.Token, 10)
		keys := []string{keyOf(prefix, name, ":lease"), keyOf(prefix, name, ":released:"+token)}
		if n, err := c.Eval(ctx, oldReleaseSrc, keys, name, "holder", token, "old-nonce", 60000).Int(); err != nil || n != 1 {
			t.Fatalf("the old release.lua: %v, %v", n, err)
		}
		wakeWithin(t, wA.Changed(), 5*time.Second, "an old version's Release")
		wakeWithin(t, wB.Changed(), 5*time.Second, "an old version's Release, although another Locker's mark is first")
		wakeWithin(t, plain.Changed(), 5*time.Second, "an old version's Release")

		drainAll(wA, wB, plain)
		if err := c.Publish(ctx, channelOf(prefix, name), "dequeued").Err(); err != nil {
			t.Fatal(err)
		}
		wakeWithin(t, plain.Changed(), 5*time.Second, "a Dequeue's message")
		quietFor(t, wA.Changed(), turnQuiet, "a Dequeue's message")
		quietFor(t, wB.Changed(), 0, "a Dequeue's message")
	})
}

// TestTurnWatchWakesOnADroppedConnection: the waiter of a Locker whose
// mark is behind another Locker's still wakes when its pub/sub connection
// drops: a release meanwhile may have chosen no one.
func TestTurnWatchWakesOnADroppedConnection(t *testing.T) {
	t.Parallel()
	eachWatchServer(t, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		const name = "jobs/turndrop"
		p := faultproxy.StartT(t, addr)
		holder, a, b := newLocker(addr), newLocker(p.Addr()), newLocker(addr)
		wA, wB := newWaiter(t, a, name), newWaiter(t, b, name)
		mustAcquire(t, holder, name, "holder")
		waitTurn(t, wB, "waiter-b")
		waitTurn(t, wA, "waiter-a")
		drainAll(wA, wB)
		p.Reset()
		wakeWithin(t, wA.Changed(), 5*time.Second, "the reset of its pub/sub connection")
		wakeWithin(t, wA.Changed(), 10*time.Second, "its subscription in place again")
	})
}

// TestTurnLeavesNothingBehind: waiters that give up without StopWaiting
// (their Lockers closed) leave marks whose keys expire within the marks'
// life by the server's clock; no key under the prefix lacks an expiry.
func TestTurnLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	// pass lets d pass on the server's clock, or less once gone says the
	// keys are gone.
	check := func(t *testing.T, c *redis.Client, prefix string, newLocker func() *redislease.Locker, pass func(d time.Duration, gone func() bool)) {
		ctx := t.Context()
		const name = "jobs/behind"
		holder := newLocker()
		held := mustAcquire(t, holder, name, "holder")
		for _, owner := range []string{"waiter-a", "waiter-b"} {
			l := newLocker()
			// Marks that last 1.5s, for a shorter test.
			w := linetest.New(l, name, false, 500*time.Millisecond)
			t.Cleanup(w.Stop)
			waitTurn(t, w, owner)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
		ids := marksOf(t, c, prefix, name)
		if len(ids) != 2 {
			t.Fatalf("marks of two closed waiters: %q, want two (Close sends nothing)", ids)
		}
		// The Locker chooses the marks' life: the longest is how long the
		// keys may last.
		var life time.Duration
		for _, id := range ids {
			life = max(life, time.Duration(scoreOf(t, c, prefix, name, ":lapses", id)-scoreOf(t, c, prefix, name, ":marks", id))*time.Microsecond)
		}
		if life <= 0 || life > time.Minute {
			t.Fatalf("the marks last %s, want within (0, 1m] for this test", life)
		}
		life = life.Round(time.Millisecond)
		keys, err := c.Keys(ctx, globEscape(prefix)+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			d := c.PTTL(ctx, k).Val()
			if d <= 0 {
				t.Fatalf("key %s has no expiry (PTTL %s)", k, d)
			}
			if (strings.HasSuffix(k, ":marks") || strings.HasSuffix(k, ":lapses")) && d > life {
				t.Fatalf("key %s expires in %s, after the marks' life (%s)", k, d, life)
			}
		}
		pass(life+100*time.Millisecond, func() bool {
			return c.Exists(ctx, keyOf(prefix, name, ":marks"), keyOf(prefix, name, ":lapses")).Val() == 0
		})
		for _, suffix := range []string{":marks", ":lapses"} {
			if n := c.Exists(ctx, keyOf(prefix, name, suffix)).Val(); n != 0 {
				t.Fatalf("key %s outlived its marks", suffix)
			}
		}
		if err := holder.Release(ctx, held); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		mr := miniredis.RunT(t)
		c := newClient(t, mr.Addr())
		check(t, c, "lease:", func() *redislease.Locker {
			l := mustNew(t, c)
			t.Cleanup(func() { _ = l.Close() })
			return l
		}, func(d time.Duration, _ func() bool) { mr.FastForward(d) })
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		c, _ := realRedis(t, -1)
		prefix := randomPrefix("behind")
		deleteKeys(t, c, prefix)
		check(t, c, prefix, func() *redislease.Locker {
			l := mustNew(t, c, redislease.WithPrefix(prefix))
			t.Cleanup(func() { _ = l.Close() })
			return l
		}, func(d time.Duration, gone func() bool) {
			for deadline := time.Now().Add(d); !gone() && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
		})
	})
}

// TestTurnOnCluster: marks and releases keep to the name's slot on a real
// Redis Cluster, and a release there wakes only the chosen Locker.
func TestTurnOnCluster(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	cl := testserver.StartRedisCluster(t, nil)
	raw := "redis+cluster://" + strings.Join(cl.Addrs(), ",")
	open := func() *redislease.Locker {
		l, err := redislease.Open(t.Context(), raw)
		if err != nil {
			t.Fatalf("Open(%s): %v", raw, err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	ctx := t.Context()
	holder, a, b := open(), open(), open()
	for i := range 5 {
		name := "cluster/turn-" + strconv.Itoa(i)
		wA, wB := newWaiter(t, a, name), newWaiter(t, b, name)
		held := mustAcquire(t, holder, name, "holder")
		waitTurn(t, wB, "waiter-b")
		waitTurn(t, wA, "waiter-a")
		drainAll(wA, wB)
		if err := holder.Release(ctx, held); err != nil {
			t.Fatal(err)
		}
		wakeWithin(t, wB.Changed(), 5*time.Second, "a Release that chose its mark")
		quietFor(t, wA.Changed(), turnQuiet, "a Release that chose another Locker's mark")
		got := takeTurn(t, wB, "waiter-b")
		drainAll(wA, wB)
		if _, err := holder.ForceRelease(ctx, name); err != nil {
			t.Fatal(err)
		}
		wakeWithin(t, wA.Changed(), 5*time.Second, "a ForceRelease that chose its mark")
		quietFor(t, wB.Changed(), turnQuiet, "a ForceRelease that chose another Locker's mark")
		_ = got
		wA.Stop()
		wB.Stop()
	}
}

// TestWatchStopSendsNothing: stopping the last Watch of a name sends no
// command, nor does the last waiter of a Locker that leaves with the name
// and no mark (its turn watch stops); the subscription stays, and a new
// Watch of the name uses it without a command and hears releases.
func TestWatchStopSendsNothing(t *testing.T) {
	t.Parallel()
	eachWatchServer(t, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		ctx := t.Context()
		c := newClient(t, addr)
		const name = "jobs/linger"
		p := startProxy(t, addr)
		l, direct := newLocker(p.Addr()), newLocker(addr)
		sent := func(from int) []string {
			return slices.DeleteFunc(p.Commands()[from:], func(c string) bool { return c == "ping" })
		}
		for _, turn := range []bool{false, true} {
			var (
				stop func()
				got  lease.Lease
			)
			if turn {
				// The waiter's first attempt sets up the turn watch and,
				// the name being free, acquires it without a mark.
				wt := newWaiter(t, l, name)
				got = takeTurn(t, wt, "waiter")
				stop = func() { wt.Done(true) }
			} else {
				w, err := l.Watch(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				stop = w.Stop
			}
			before := len(p.Commands())
			stop()
			time.Sleep(50 * time.Millisecond)
			if got := sent(before); len(got) != 0 {
				t.Fatalf("Stop of the last Watch on a name sent %q, want nothing (turn watch: %t)", got, turn)
			}
			if n := numsub(t, c, channelOf(prefix, name)); n != 1 {
				t.Fatalf("after Stop the name's channel has %d subscribers, want 1 (idle)", n)
			}
			if turn {
				if err := l.Release(ctx, got); err != nil {
					t.Fatal(err)
				}
			}
		}
		before := len(p.Commands())
		w, err := l.Watch(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if got := sent(before); len(got) != 0 {
			t.Fatalf("a Watch on an idle subscription sent %q, want nothing", got)
		}
		held := mustAcquire(t, direct, name, "holder")
		drain(w.Changed())
		if err := direct.Release(ctx, held); err != nil {
			t.Fatal(err)
		}
		wakeWithin(t, w.Changed(), 5*time.Second, "a Release, on a subscription that was idle")
	})
}

// TestWatchIdleSubscriptionsGo: idle subscriptions are dropped after
// their linger, and a Watch of the name afterwards subscribes again; a
// message on an idle subscription wakes nothing.
func TestWatchIdleSubscriptionsGo(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	eachWatchServer(t, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		ctx := t.Context()
		c := newClient(t, addr)
		const name = "jobs/idle"
		l, direct := newLocker(addr), newLocker(addr)
		redislease.SetWatchLimits(l, 100*time.Millisecond, 0)
		w, err := l.Watch(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
		held := mustAcquire(t, direct, name, "holder")
		if err := direct.Release(ctx, held); err != nil {
			t.Fatal(err)
		}
		quietFor(t, w.Changed(), 50*time.Millisecond, "a Release after its Stop")
		// The loop looks at idle subscriptions after each ping (2s apart
		// on a silent connection).
		waitNumsub(t, c, channelOf(prefix, name), 0)
		w, err = l.Watch(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if n := numsub(t, c, channelOf(prefix, name)); n != 1 {
			t.Fatalf("a Watch after the idle subscription went: %d subscribers, want 1", n)
		}
		held = mustAcquire(t, direct, name, "holder")
		if err := direct.Release(ctx, held); err != nil {
			t.Fatal(err)
		}
		wakeWithin(t, w.Changed(), 5*time.Second, "a Release")
	})
}

// TestWatchIdleSubscriptionsAreBounded: beyond the bound, the oldest idle
// subscriptions go at once, and the newer ones stay.
func TestWatchIdleSubscriptionsAreBounded(t *testing.T) {
	t.Parallel()
	eachWatchServer(t, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		ctx := t.Context()
		c := newClient(t, addr)
		l := newLocker(addr)
		redislease.SetWatchLimits(l, time.Hour, 8)
		const n = 9
		for i := range n {
			w, err := l.Watch(ctx, "jobs/bound-"+strconv.Itoa(i))
			if err != nil {
				t.Fatal(err)
			}
			w.Stop()
		}
		// Nine idle, over eight: the two oldest go, down to seven.
		for i := range n {
			want := int64(1)
			if i < 2 {
				want = 0
			}
			waitNumsub(t, c, channelOf(prefix, "jobs/bound-"+strconv.Itoa(i)), want)
		}
	})
}

// TestTurnWatchOnRingIsUnsupported: a Ring client cannot watch turns
// either, and its Locker says so: lease.Can says no to driver.Watcher (yes
// on a plain client's), a waiter's attempt is a plain Acquire outside any
// line, and a fair one fails at once with errors.ErrUnsupported, as
// lease.Run with WithFairWait does, without acquiring the name.
func TestTurnWatchOnRingIsUnsupported(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	plain := mustNew(t, newClient(t, mr.Addr()), redislease.WithPrefix("plain:"))
	defer plain.Close()
	if !lease.Can[driver.Watcher](plain) {
		t.Fatal("lease.Can[driver.Watcher] is false on a plain client's Locker")
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": mr.Addr()}})
	defer ring.Close()
	l := mustNew(t, ring)
	defer l.Close()
	ctx := t.Context()
	if lease.Can[driver.Watcher](l) {
		t.Fatal("lease.Can[driver.Watcher] is true on a Ring's Locker, which cannot watch")
	}
	for _, i := range []any{(*lease.Lister)(nil), (*lease.ForceReleaser)(nil), (*batchtest.Batcher)(nil)} {
		if !l.Can(i) {
			t.Fatalf("Can(%T) is false on a Ring's Locker", i)
		}
	}
	if _, err := l.Watch(ctx, "jobs/ring"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Watch on a Ring: %v, want ErrUnsupported", err)
	}

	const name = "jobs/ring"
	fair := linetest.New(l, name, true, 0)
	defer fair.Stop()
	if got, err := fair.Acquire(ctx, "fair", time.Minute); !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "WithFairWait") {
		t.Fatalf("a fair waiter's Acquire on a Ring: %v, %v; want ErrUnsupported naming WithFairWait", got, err)
	}
	ran := false
	start := time.Now()
	err := lease.Run(ctx, l, name, time.Minute, func(context.Context) error {
		ran = true
		return nil
	}, lease.WithFairWait(time.Second), lease.WithOwner("fair"))
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "WithFairWait") {
		t.Fatalf("Run with WithFairWait on a Ring: %v, want ErrUnsupported naming WithFairWait", err)
	}
	if ran {
		t.Fatal("Run with WithFairWait on a Ring ran its function")
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("Run with WithFairWait on a Ring failed after %s, want at once", d)
	}
	if got, err := l.Inspect(ctx, name); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("after the fair waits on a Ring: %v, %v; want the name never acquired", got, err)
	}

	w := linetest.New(l, name, false, 0)
	defer w.Stop()
	got, err := w.Acquire(ctx, "waiter", time.Minute)
	if err != nil || got.Owner != "waiter" {
		t.Fatalf("an unfair waiter's Acquire of a free name on a Ring: %v, %v", got, err)
	}
	if w.Taken() {
		t.Fatal("a Ring's Locker keeps a line of waiters, which it cannot watch")
	}
	w.Done(true)
	if err := l.Release(ctx, got); err != nil {
		t.Fatal(err)
	}
}

// TestTurnMarksKeepTheirOrder: marks placed while the server's clock
// stands still (within one microsecond, or a clock stepped back) still
// line up in the order they came, not by waiter ID.
func TestTurnMarksKeepTheirOrder(t *testing.T) {
	t.Parallel()
	_, c, _ := newMiniredis(t) // its TIME stands still until advanced
	const name = "jobs/order"
	holder := mustNew(t, c)
	defer holder.Close()
	mustAcquire(t, holder, name, "holder")
	var want []string
	for i := range 6 {
		l := mustNew(t, c)
		defer l.Close()
		waitTurn(t, newWaiter(t, l, name), "waiter-"+strconv.Itoa(i))
		got := marksOf(t, c, "lease:", name)
		if len(got) != i+1 || !slices.Equal(got[:i], want) {
			t.Fatalf("marks after %d waiters: %q, want %q and the new one last", i+1, got, want)
		}
		want = got
	}
}
