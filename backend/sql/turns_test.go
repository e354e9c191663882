package sqllease

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/linetest"
)

// The tests of waiting for a turn (turns.go) on the real PostgreSQL server
// of LEASE_TEST_POSTGRES: a release wakes the Locker whose mark was placed
// first, and no other Locker's turn watches.

// noWake fails t if w wakes within d.
func noWake(t *testing.T, w driver.Watch, d time.Duration, after string) {
	t.Helper()
	select {
	case <-w.Changed():
		t.Fatalf("the watch woke within %s of %s; it should not have", d, after)
	case <-time.After(d):
	}
}

// drainAll empties the pending wake-ups of ws.
func drainAll(ws ...driver.Watch) {
	for _, w := range ws {
		drain(w)
	}
}

// markCount counts the marks on name in s's marks table, lapsed or not.
func (s *testStore) markCount(t *testing.T, name string) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM `+marksTable(s.table)+` WHERE lease_key = $1`, key(name)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// allMarks counts every row of s's marks table.
func (s *testStore) allMarks(t *testing.T) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM ` + marksTable(s.table)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// markRow returns waiter's mark on name: when it was placed (µs) and when
// it lapses (ms), and the database's now (ms).
func (s *testStore) markRow(t *testing.T, name, waiter string) (placed, lapses, now int64, ok bool) {
	t.Helper()
	err := s.db.QueryRow(`SELECT placed_us, lapses_at, `+nowExpr[PostgreSQL]+` FROM `+marksTable(s.table)+` WHERE lease_key = $1 AND waiter = $2`,
		key(name), waiter).Scan(&placed, &lapses, &now)
	if err != nil {
		if strings.Contains(err.Error(), "no rows") {
			return 0, 0, 0, false
		}
		t.Fatal(err)
	}
	return placed, lapses, now, true
}

// waitLapsed waits, bounded, until waiter's mark on name has lapsed by
// the database's clock (or is gone).
func (s *testStore) waitLapsed(t *testing.T, name, waiter string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, lapses, now, ok := s.markRow(t, name, waiter)
		if !ok || now >= lapses {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's mark on %s has not lapsed by the database's clock after 5s", waiter, name)
		}
	}
}

// eavesdrop listens on l's channel on a connection of its own, as another
// process would, and returns a function that waits up to d for the next
// payload.
func eavesdrop(t *testing.T, s *testStore, l *Locker) func(d time.Duration) (string, bool) {
	t.Helper()
	ctx := t.Context()
	if err := l.s.setup(ctx); err != nil {
		t.Fatal(err)
	}
	ch, _ := channelFor(l.s.qualified)
	ear, err := s.listener.l.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ear.Close() })
	if err := ear.Exec(ctx, "LISTEN "+quoteIdent(ch)); err != nil {
		t.Fatal(err)
	}
	return func(d time.Duration) (string, bool) {
		wctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		_, p, err := ear.WaitForNotification(wctx)
		return p, err == nil
	}
}

// waitIn returns a waiter for name on l that steps through the Locker's
// waiting attempt by attempt (internal/linetest), as lease.Run's WithWait
// would, and gives up when t ends.
func waitIn(t *testing.T, l lease.Locker, name string) *linetest.Waiter {
	t.Helper()
	w := linetest.New(l, name, false, 0)
	t.Cleanup(w.Stop)
	return w
}

// isHeldErr fails t unless err is a *lease.HeldError naming owner as the
// holder.
func isHeldErr(t *testing.T, err error, owner, what string) *lease.HeldError {
	t.Helper()
	var he *lease.HeldError
	if !errors.As(err, &he) || he.Owner != owner {
		t.Fatalf("%s: %v, want ErrHeld by %s", what, err, owner)
	}
	return he
}

// markOrder returns the waiter IDs of the marks on name, lapsed or not,
// in line order (when each was placed).
func (s *testStore) markOrder(t *testing.T, name string) []string {
	t.Helper()
	rows, err := s.db.Query(`SELECT waiter FROM `+marksTable(s.table)+` WHERE lease_key = $1 ORDER BY placed_us, waiter`, key(name))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ws []string
	for rows.Next() {
		var w string
		if err := rows.Scan(&w); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ws
}

// TestTurnWakesTheFirstMarkedLocker: with two Lockers waiting, a release
// wakes the first waiter of the Locker whose mark came first, and neither
// the other Locker nor the first Locker's second waiter; a plain watch
// wakes at every release. A Locker whose first waiter acquires while
// another of its waiters still waits keeps its mark, placed anew at the
// back (Keep): a force-release then wakes the other Locker and not it.
// Once that one has acquired, its mark is gone, and its release wakes the
// first Locker's remaining waiter, whose acquiring leaves no mark.
func TestTurnWakesTheFirstMarkedLocker(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	holder, a, b, c := s.openLocker(t), s.openLocker(t), s.openLocker(t), s.openLocker(t)
	ctx := t.Context()
	const name = "turn"
	held, err := holder.Acquire(ctx, name, "h", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a1, a2, b1 := waitIn(t, a, name), waitIn(t, a, name), waitIn(t, b, name)
	wc, err := c.Watch(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Stop()
	_, err = a1.Acquire(ctx, "a", time.Minute)
	isHeldErr(t, err, "h", "a's first waiter")
	_, err = b1.Acquire(ctx, "b", time.Minute)
	isHeldErr(t, err, "h", "b's waiter")
	_, err = a2.Acquire(ctx, "a", time.Minute)
	isHeldErr(t, err, "h", "a's second waiter")
	order := s.markOrder(t, name)
	if len(order) != 2 {
		t.Fatalf("marks %q after three busy waiters of two Lockers, want one per Locker", order)
	}
	idA, idB := order[0], order[1]
	drainAll(a1, a2, b1, wc)
	if err := holder.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	waitWake(t, a1, 5*time.Second, "a release, a's mark first")
	waitWake(t, wc, 5*time.Second, "a release (plain watch)")
	noWake(t, b1, 300*time.Millisecond, "a release that chose a's mark")
	noWake(t, a2, 50*time.Millisecond, "a release that chose a's mark, whose first waiter is another")

	if _, err := a1.Acquire(ctx, "a", time.Minute); err != nil {
		t.Fatalf("a's first waiter, woken: %v", err)
	}
	a1.Done(true)
	if got := s.markOrder(t, name); len(got) != 2 || got[0] != idB || got[1] != idA {
		t.Fatalf("marks %q after a acquired with a waiter left, want b's (%s) and then a's (%s), placed anew", got, idB, idA)
	}
	drainAll(a2, b1, wc)
	if _, err := holder.ForceRelease(ctx, name); err != nil {
		t.Fatal(err)
	}
	waitWake(t, b1, 5*time.Second, "a force-release, b's mark first")
	waitWake(t, wc, 5*time.Second, "a force-release (plain watch)")
	noWake(t, a2, 300*time.Millisecond, "a force-release that chose b's mark (a's is behind it)")

	hb, err := b1.Acquire(ctx, "b", time.Minute)
	if err != nil {
		t.Fatalf("b, woken: %v", err)
	}
	b1.Done(true)
	if got := s.markOrder(t, name); len(got) != 1 || got[0] != idA {
		t.Fatalf("marks %q after b acquired, want a's (%s) alone", got, idA)
	}
	drainAll(a2, wc)
	if err := b.Release(ctx, hb); err != nil {
		t.Fatal(err)
	}
	waitWake(t, a2, 5*time.Second, "a release, a's mark the only one")
	waitWake(t, wc, 5*time.Second, "a release (plain watch)")
	if _, err := a2.Acquire(ctx, "a", time.Minute); err != nil {
		t.Fatalf("a's second waiter, woken: %v", err)
	}
	a2.Done(true)
	if n := s.markCount(t, name); n != 0 {
		t.Fatalf("%d marks after the last waiter acquired, want none", n)
	}
}

// TestAcquireOrWaitMovesTheMark: a busy AcquireOrWait places the waiter's
// mark, lapsing its life later by the database's clock, and a second one
// keeps its place and moves its lapse; one that acquires removes it, or
// with Keep places it anew behind the others. Each is one statement, as
// Acquire is, and a release stays one.
func TestAcquireOrWaitMovesTheMark(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	var c counter
	l, err := New(countingDB(t, s, &c), s.baseOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := t.Context()
	const name = "moves"
	held, err := l.Acquire(ctx, name, "h", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	life := testMarkLife
	c.take()
	got, err := l.s.AcquireOrWait(ctx, name, "o1", time.Minute, driver.Mark{Waiter: "w1", Life: life})
	if err != nil || got.Owner != "h" || got.Remaining <= 0 {
		t.Fatalf("busy AcquireOrWait: %+v, %v; want the holder h with its time left", got, err)
	}
	if stmts, txs := c.take(); len(stmts) != 1 || txs != 0 {
		t.Errorf("a busy AcquireOrWait sent %d statements and %d transactions, want 1 and 0", len(stmts), txs)
	}
	p1, lapse1, now, ok := s.markRow(t, name, "w1")
	if !ok {
		t.Fatal("no mark after a busy AcquireOrWait")
	}
	if d := time.Duration(lapse1-now) * time.Millisecond; d <= life-time.Second || d > life {
		t.Errorf("the mark lapses in %s by the database's clock, want about %s", d, life)
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := l.s.AcquireOrWait(ctx, name, "o1", time.Minute, driver.Mark{Waiter: "w1", Life: life}); err != nil {
		t.Fatal(err)
	}
	p2, lapse2, _, _ := s.markRow(t, name, "w1")
	if p2 != p1 || lapse2 <= lapse1 {
		t.Errorf("a second busy AcquireOrWait: placed %d, lapses %d; want placed %d kept and the lapse moved past %d", p2, lapse2, p1, lapse1)
	}
	if _, err := l.s.AcquireOrWait(ctx, name, "o2", time.Minute, driver.Mark{Waiter: "w2", Life: life}); err != nil {
		t.Fatal(err)
	}
	pw2, _, _, _ := s.markRow(t, name, "w2")
	if pw2 <= p1 {
		t.Errorf("w2's mark, placed after w1's, has placed_us %d <= %d", pw2, p1)
	}

	c.take()
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	if stmts, _ := c.take(); len(stmts) != 1 {
		t.Errorf("Release sent %d statements, want 1", len(stmts))
	}
	got, err = l.s.AcquireOrWait(ctx, name, "o1", time.Minute, driver.Mark{Waiter: "w1", Life: life, Keep: true})
	if err != nil || got.Owner != "o1" {
		t.Fatalf("AcquireOrWait of the free name: %+v, %v", got, err)
	}
	if stmts, _ := c.take(); len(stmts) != 1 {
		t.Errorf("an acquiring AcquireOrWait sent %d statements, want 1", len(stmts))
	}
	if p3, _, _, ok := s.markRow(t, name, "w1"); !ok || p3 <= pw2 {
		t.Errorf("after acquiring with Keep, w1's mark: placed %d, present %v; want it placed anew after w2's (%d)", p3, ok, pw2)
	}
	// Re-entering without Keep removes it.
	if _, err := l.s.AcquireOrWait(ctx, name, "o1", time.Minute, driver.Mark{Waiter: "w1", Life: life}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := s.markRow(t, name, "w1"); ok {
		t.Error("w1's mark is still there after an AcquireOrWait that re-entered without Keep")
	}
	if n := s.markCount(t, name); n != 1 {
		t.Errorf("%d marks, want w2's alone", n)
	}
}

// TestLapsedMarkIsSkipped: a release passes over a mark that lapsed by the
// database's clock, though it was placed first, and names the next one in
// its NOTIFY; the next busy AcquireOrWait of the name deletes the lapsed
// mark.
func TestLapsedMarkIsSkipped(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	l := s.newLocker(t)
	ctx := t.Context()
	heard := eavesdrop(t, s, l)
	const name = "lapsed"
	wx, err := l.s.WatchTurn(ctx, name, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer wx.Stop()
	wy, err := l.s.WatchTurn(ctx, name, "y")
	if err != nil {
		t.Fatal(err)
	}
	defer wy.Stop()
	held, err := l.Acquire(ctx, name, "h", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.s.AcquireOrWait(ctx, name, "ox", time.Minute, driver.Mark{Waiter: "x", Life: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.s.AcquireOrWait(ctx, name, "oy", time.Minute, driver.Mark{Waiter: "y", Life: time.Minute}); err != nil {
		t.Fatal(err)
	}
	s.waitLapsed(t, name, "x")
	drainAll(wx, wy)
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	if p, ok := heard(5 * time.Second); !ok || p != hex.EncodeToString(key(name))+" y" {
		t.Fatalf("the release's NOTIFY: %q, %v; want the key and y", p, ok)
	}
	waitWake(t, wy, 5*time.Second, "a release that chose y")
	noWake(t, wx, 300*time.Millisecond, "a release that passed over x's lapsed mark")

	if _, err := l.Acquire(ctx, name, "h", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := l.s.AcquireOrWait(ctx, name, "oy", time.Minute, driver.Mark{Waiter: "y", Life: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := s.markRow(t, name, "x"); ok {
		t.Error("x's lapsed mark is still there after another waiter's busy AcquireOrWait")
	}
	// A lapsed mark that gets renewed goes to the back.
	if _, err := l.s.AcquireOrWait(ctx, name, "ox", time.Minute, driver.Mark{Waiter: "x", Life: time.Minute}); err != nil {
		t.Fatal(err)
	}
	px, _, _, _ := s.markRow(t, name, "x")
	py, _, _, _ := s.markRow(t, name, "y")
	if px <= py {
		t.Errorf("x's mark, placed anew after lapsing, is ahead of y's (%d <= %d)", px, py)
	}
}

// TestStopWaitingRemovesTheMark: two waiters of one Locker share its one
// mark, and only the first asks the database: the second is answered
// the first's "held" without a statement. When the first gives up, the
// mark stays and the second, now first, is woken and asks itself; when
// the Locker's last waiter gives up, the mark goes (StopWaiting, which
// the Locker sends). StopWaiting of a waiter without a mark is no error.
func TestStopWaitingRemovesTheMark(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	holder := s.openLocker(t)
	var c counter
	a, err := New(countingDB(t, s, &c), s.baseOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := t.Context()
	const name = "stop"
	if _, err := holder.Acquire(ctx, name, "h", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := a.s.setup(ctx); err != nil {
		t.Fatal(err)
	}
	w1, w2 := waitIn(t, a, name), waitIn(t, a, name)
	c.take()
	_, err = w1.Acquire(ctx, "a", time.Minute)
	isHeldErr(t, err, "h", "the first waiter")
	if stmts, _ := c.take(); len(stmts) != 1 {
		t.Errorf("the first waiter's attempt sent %d statements, want 1", len(stmts))
	}
	_, err = w2.Acquire(ctx, "a", time.Minute)
	if he := isHeldErr(t, err, "h", "the second waiter"); he.Remaining <= 0 || he.Name != name {
		t.Errorf("the second waiter's HeldError: %+v, want the name and the holder's time left", he)
	}
	if stmts, _ := c.take(); len(stmts) != 0 {
		t.Errorf("the second waiter's attempt sent %d statements, want none (the first waiter asks)", len(stmts))
	}
	if n := s.markCount(t, name); n != 1 {
		t.Fatalf("%d marks with two waiters of one Locker, want 1", n)
	}
	drain(w2)
	w1.Stop()
	if stmts, _ := c.take(); len(stmts) != 0 {
		t.Errorf("the first waiter giving up while another waits sent %d statements, want none", len(stmts))
	}
	if n := s.markCount(t, name); n != 1 {
		t.Fatalf("%d marks while a waiter of the Locker remains, want 1", n)
	}
	waitWake(t, w2, 5*time.Second, "the first waiter gave up")
	_, err = w2.Acquire(ctx, "a", time.Minute)
	isHeldErr(t, err, "h", "the second waiter, first now")
	if stmts, _ := c.take(); len(stmts) != 1 {
		t.Errorf("the second waiter, first now, sent %d statements, want 1", len(stmts))
	}
	w2.Stop()
	if n := s.markCount(t, name); n != 0 {
		t.Fatalf("%d marks after the Locker's last waiter gave up, want 0", n)
	}
	if err := a.s.StopWaiting(ctx, name, "nobody"); err != nil {
		t.Fatalf("StopWaiting without a mark: %v", err)
	}
}

// TestTurnWatchesWakeWithoutMarks: when no Locker has a mark, a release
// wakes every turn watch, and so does a notification in the format of
// earlier versions (the key alone), marks or not; a notification naming
// another waiter wakes only plain watches. (The turn watches are the
// stores', under waiter IDs of the test's: a Locker sets its own up with
// its first waiting attempt, which places its mark.)
func TestTurnWatchesWakeWithoutMarks(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	holder, a, b := s.openLocker(t), s.openLocker(t), s.openLocker(t)
	ctx := t.Context()
	const name = "nomarks"
	wa, err := a.s.WatchTurn(ctx, name, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Stop()
	wb, err := b.s.WatchTurn(ctx, name, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Stop()
	wp, err := b.Watch(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer wp.Stop()
	held, err := holder.Acquire(ctx, name, "h", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	drainAll(wa, wb, wp)
	if err := holder.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	for _, w := range []driver.Watch{wa, wb, wp} {
		waitWake(t, w, 5*time.Second, "a release with no marks")
	}

	// a has a mark now; a notification as an earlier version sends it
	// still wakes b.
	if _, err := holder.Acquire(ctx, name, "h", time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, err := a.s.AcquireOrWait(ctx, name, "a", time.Minute, driver.Mark{Waiter: "a", Life: testMarkLife}); err != nil || got.Owner != "h" {
		t.Fatalf("a's busy AcquireOrWait: %+v, %v; want the holder", got, err)
	}
	if n := s.markCount(t, name); n != 1 {
		t.Fatalf("%d marks, want a's", n)
	}
	ch, _ := channelFor(a.s.qualified)
	notify := func(payload string) {
		t.Helper()
		if _, err := s.db.Exec(`SELECT pg_notify($1, $2)`, ch, payload); err != nil {
			t.Fatal(err)
		}
	}
	drainAll(wa, wb, wp)
	notify(hex.EncodeToString(key(name)))
	for _, w := range []driver.Watch{wa, wb, wp} {
		waitWake(t, w, 5*time.Second, "a notification without a waiter")
	}
	drainAll(wa, wb, wp)
	notify(hex.EncodeToString(key(name)) + " someone-else")
	waitWake(t, wp, 5*time.Second, "a notification naming another waiter (plain watch)")
	noWake(t, wa, 300*time.Millisecond, "a notification naming another waiter")
	select {
	case <-wb.Changed():
		t.Fatal("b's turn watch woke at a notification naming another waiter")
	default:
	}
}

// TestTurnWatchWakesOnADroppedConnection: a Locker's turn watch wakes its
// waiter when its listening connection is cut, since a release may have
// gone unheard, and a release that chooses it wakes it again after the
// reconnection.
func TestTurnWatchWakesOnADroppedConnection(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	l := s.newLocker(t)
	other := s.openLocker(t)
	ctx := t.Context()
	const name = "dropturn"
	held, err := other.Acquire(ctx, name, "h", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w := waitIn(t, l, name)
	_, err = w.Acquire(ctx, "a", time.Minute)
	isHeldErr(t, err, "h", "the waiter")
	drain(w)
	// Cut every listening connection of the store's listener: l's (and
	// other's, which is not listening).
	if _, err := s.db.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, s.listener.app); err != nil {
		t.Fatal(err)
	}
	waitWake(t, w, 5*time.Second, "the listening connection was cut")
	deadline := time.Now().Add(10 * time.Second)
	for s.watchLocks(t) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("10s after the cut: %d watch locks, want 1", s.watchLocks(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
	drain(w)
	if err := other.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	waitWake(t, w, 5*time.Second, "a release choosing the Locker after the reconnection")
}

// TestMarksLeaveNothing: Lockers that wait and give up leave no mark
// behind, and Cleanup deletes the marks that lapsed (a waiter that died
// without StopWaiting).
func TestMarksLeaveNothing(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	holder := s.openLocker(t)
	ctx := t.Context()
	if _, err := holder.Acquire(ctx, "busy", "h", time.Minute); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 5 {
		l := s.openLocker(t)
		// Two waiters per Locker: the first asks, the second is answered
		// from the first's answer; whichever leaves last takes the mark.
		for j := range 2 {
			wg.Go(func() {
				w := linetest.New(l, "busy", false, 0)
				defer w.Stop()
				for range 3 {
					if _, err := w.Acquire(ctx, fmt.Sprint("w", i, j), time.Minute); !errors.Is(err, lease.ErrHeld) {
						t.Errorf("waiter %d/%d: %v, want ErrHeld", i, j, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if n := s.allMarks(t); n != 0 {
		t.Fatalf("%d marks after every waiter gave up, want 0", n)
	}
	// A waiter that died: its mark lapses and Cleanup deletes it.
	if _, err := holder.s.AcquireOrWait(ctx, "busy", "dead", time.Minute, driver.Mark{Waiter: "dead", Life: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	s.waitLapsed(t, "busy", "dead")
	if _, err := holder.Cleanup(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := s.allMarks(t); n != 0 {
		t.Fatalf("%d marks after Cleanup, want the lapsed one gone", n)
	}
}

// TestMissingMarksTable: on a lease table without its marks table and with
// auto-create off, the store's WatchTurn reports errors.ErrUnsupported
// naming the marks table, and once the Locker has found that out its Can
// says it keeps no line (though it watches): its waiters poll, their
// attempts are Acquires (no mark), a fair wait fails at once naming
// WithFairWait, and releases wake plain watches as before. A table of the
// marks table's name that is not one is not used. A Locker with
// auto-create on creates the marks table beside the existing lease table,
// and keeps a line.
func TestMissingMarksTable(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	ctx := t.Context()
	stmts, err := schemaStatements(PostgreSQL, s.table)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(stmts[0]); err != nil {
		t.Fatal(err)
	}
	off := s.newLocker(t, WithoutAutoCreate())
	if _, err := off.s.WatchTurn(ctx, "m", "w"); !errors.Is(err, errors.ErrUnsupported) || !contains(err, "marks table") {
		t.Fatalf("WatchTurn without a marks table: %v, want ErrUnsupported naming the marks table", err)
	}
	if off.s.Can((*driver.TurnWatcher)(nil)) || !off.s.Can((*driver.Watcher)(nil)) || !lease.Can[driver.Watcher](off) {
		t.Fatal("Can without a marks table: want a Watcher and no TurnWatcher")
	}
	w, err := off.Watch(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	held, err := off.Acquire(ctx, "m", "h", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wt := waitIn(t, off, "m")
	_, err = wt.Acquire(ctx, "a", time.Minute)
	isHeldErr(t, err, "h", "a waiting attempt without marks, name held")
	if wt.Taken() {
		t.Error("the Locker took the waiter into a line without a marks table")
	}
	fair := linetest.New(off, "m", true, 0)
	defer fair.Stop()
	if _, err := fair.Acquire(ctx, "a", time.Minute); !errors.Is(err, errors.ErrUnsupported) || !contains(err, "WithFairWait") {
		t.Fatalf("a fair waiting attempt without marks: %v, want ErrUnsupported naming WithFairWait", err)
	}
	drain(w)
	if err := off.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	waitWake(t, w, 5*time.Second, "a release without a marks table")
	if got, err := wt.Acquire(ctx, "a", time.Minute); err != nil || got.Owner != "a" {
		t.Fatalf("a waiting attempt without marks, name free: %v, %v", got, err)
	}
	wt.Done(true)

	// Not a marks table.
	if _, err := s.db.Exec(`CREATE TABLE ` + marksTable(s.table) + ` (x int)`); err != nil {
		t.Fatal(err)
	}
	odd := s.newLocker(t)
	if _, err := odd.s.WatchTurn(ctx, "m", "w"); !errors.Is(err, errors.ErrUnsupported) || !contains(err, "not a marks table") {
		t.Fatalf("WatchTurn with a foreign table in the marks table's place: %v, want ErrUnsupported", err)
	}
	if odd.s.Can((*driver.TurnWatcher)(nil)) {
		t.Error("Can says a Locker with a foreign table in the marks table's place keeps a line")
	}
	if _, err := s.db.Exec(`DROP TABLE ` + marksTable(s.table)); err != nil {
		t.Fatal(err)
	}

	on := s.newLocker(t)
	won := waitIn(t, on, "m")
	_, err = won.Acquire(ctx, "b", time.Minute)
	isHeldErr(t, err, "a", "a waiting attempt with auto-create on a lease table without marks")
	if !won.Taken() || !on.s.Can((*driver.TurnWatcher)(nil)) {
		t.Fatal("a Locker that created the marks table keeps no line")
	}
	if n := s.markCount(t, "m"); n != 1 {
		t.Fatalf("%d marks in the new marks table after a busy waiting attempt, want 1", n)
	}
	won.Stop()
	if n := s.allMarks(t); n != 0 {
		t.Fatalf("%d marks in the new marks table after the waiter gave up", n)
	}
}

// TestSchemaHasTheMarksTable: PostgreSQL's Schema creates both tables, and
// a marks table name never passes PostgreSQL's 63 bytes.
func TestSchemaHasTheMarksTable(t *testing.T) {
	t.Parallel()
	ddl, err := Schema(PostgreSQL, "app.Leases")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ddl, "CREATE TABLE IF NOT EXISTS app.Leases (") || !strings.Contains(ddl, ";\n\nCREATE TABLE IF NOT EXISTS app.leases_marks (") {
		t.Errorf("Schema(PostgreSQL): %s", ddl)
	}
	for _, d := range []Dialect{SQLite, MySQL} {
		if ddl, _ := Schema(d, "leases"); strings.Contains(ddl, "marks") {
			t.Errorf("Schema(%s) has a marks table: %s", d, ddl)
		}
	}
	long := strings.Repeat("x", 63)
	if m := marksName(long); len(m) > 63 || m == long || !strings.HasSuffix(m, marksSuffix) {
		t.Errorf("marksName of a 63-byte name: %q", m)
	}
	if marksName(long) == marksName(strings.Repeat("x", 62)+"y") {
		t.Error("two long names share a marks table")
	}
	if m := marksName(strings.Repeat("x", 57)); m != strings.Repeat("x", 57)+"_marks" {
		t.Errorf("marksName of a 57-byte name: %q", m)
	}
	s := postgresStore(t)
	ctx := t.Context()
	table := "public." + strings.Repeat("l", 63)
	t.Cleanup(func() { dropTable(s.db, PostgreSQL, table) })
	ddl, err = Schema(PostgreSQL, table)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(ddl); err != nil {
		t.Fatalf("running Schema's statements: %v", err)
	}
	l := s.newLocker(t, WithTable(table), WithoutAutoCreate())
	w, err := l.s.WatchTurn(ctx, "x", "w")
	if err != nil {
		t.Fatalf("WatchTurn on tables made by Schema: %v", err)
	}
	w.Stop()
	if !l.s.Can((*driver.TurnWatcher)(nil)) {
		t.Error("Can says a Locker on tables made by Schema keeps no line")
	}
}

// TestTurnsUnsupportedWithoutNotifications: SQLite and MySQL Lockers, and
// PostgreSQL Lockers without a Listener, say through Can that they
// neither watch nor keep a line, their store's WatchTurn reports
// errors.ErrUnsupported, and their waiting attempts are Acquires (the
// Locker does not take the waiter into a line, and leaves no mark).
func TestTurnsUnsupportedWithoutNotifications(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, l *Locker) {
		ctx := t.Context()
		if l.s.Can((*driver.Watcher)(nil)) || l.s.Can((*driver.TurnWatcher)(nil)) {
			t.Error("Can says the store watches")
		}
		if _, err := l.s.WatchTurn(ctx, "x", "w"); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("WatchTurn: %v, want ErrUnsupported", err)
		}
		wa, wb := waitIn(t, l, "x"), waitIn(t, l, "x")
		if got, err := wa.Acquire(ctx, "a", time.Minute); err != nil || got.Owner != "a" {
			t.Fatalf("a waiting attempt on a free name: %v, %v", got, err)
		}
		wa.Done(true)
		_, err := wb.Acquire(ctx, "b", time.Minute)
		isHeldErr(t, err, "a", "a waiting attempt on a held name")
		if wa.Taken() || wb.Taken() {
			t.Error("the Locker took a waiter into a line")
		}
		if err := l.s.StopWaiting(ctx, "x", "w"); err != nil {
			t.Fatalf("StopWaiting: %v", err)
		}
	}
	t.Run("sqlite", func(t *testing.T) { check(t, sqliteStore(t).newLocker(t)) })
	t.Run("mysql", func(t *testing.T) { check(t, mysqlStore(t).newLocker(t)) })
	t.Run("postgresql", func(t *testing.T) {
		s := postgresStore(t)
		l, err := New(s.db, WithTable(s.table))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		check(t, l)
		if n := s.allMarks(t); n != 0 {
			t.Fatalf("a Locker without a Listener left %d marks", n)
		}
	})
}

// TestStoppedWatchLingers: the last Stop of a name sends nothing on the
// listening connection; its watch lock stays, and a new watch of the name
// uses it without a statement. Lingering watch locks go after the linger,
// and beyond the bound the oldest go at once.
func TestStoppedWatchLingers(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	ctx := t.Context()
	l := s.newLocker(t)
	w, err := l.Watch(ctx, "linger")
	if err != nil {
		t.Fatal(err)
	}
	sent := s.listener.sent.Load()
	w.Stop()
	time.Sleep(200 * time.Millisecond)
	if n := s.listener.sent.Load() - sent; n != 0 {
		t.Errorf("Stop sent %d statements on the listening connection, want 0", n)
	}
	if n := s.watchLocks(t); n != 1 {
		t.Fatalf("%d watch locks after Stop, want the lingering 1", n)
	}
	wt, err := l.s.WatchTurn(ctx, "linger", "w")
	if err != nil {
		t.Fatal(err)
	}
	if n := s.listener.sent.Load() - sent; n != 0 {
		t.Errorf("a watch of a lingering name sent %d statements on the listening connection, want 0", n)
	}
	// It still works.
	held, err := l.Acquire(ctx, "linger", "h", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	drain(wt)
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	waitWake(t, wt, 5*time.Second, "a release of a name watched again")
	wt.Stop()
	// A lingering watch lock wakes nobody: it has no watch. Close gives it
	// back with the connection (TestStoppedWatchesLeaveNothing).

	t.Run("expires", func(t *testing.T) {
		s := postgresStore(t)
		l := s.newLocker(t)
		setLinger(l, 300*time.Millisecond, maxLingering)
		for _, name := range []string{"a", "b"} {
			w, err := l.Watch(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			w.Stop()
		}
		if n := s.watchLocks(t); n != 2 {
			t.Fatalf("%d watch locks right after Stop, want 2 lingering", n)
		}
		deadline := time.Now().Add(5 * time.Second)
		for s.watchLocks(t) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d watch locks 5s after they stopped lingering", s.watchLocks(t))
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		s := postgresStore(t)
		l := s.newLocker(t)
		setLinger(l, time.Hour, 2)
		for i := range 5 {
			w, err := l.Watch(ctx, fmt.Sprint("n", i))
			if err != nil {
				t.Fatal(err)
			}
			w.Stop()
		}
		deadline := time.Now().Add(5 * time.Second)
		for s.watchLocks(t) != 2 {
			if time.Now().After(deadline) {
				t.Fatalf("%d watch locks linger, want the bound of 2", s.watchLocks(t))
			}
			time.Sleep(10 * time.Millisecond)
		}
		// The two that linger are the last stopped: their watches come
		// back without a statement.
		sent := s.listener.sent.Load()
		for _, name := range []string{"n3", "n4"} {
			w, err := l.Watch(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			w.Stop()
		}
		if n := s.listener.sent.Load() - sent; n != 0 {
			t.Errorf("watching the two newest lingering names sent %d statements, want 0", n)
		}
	})
}

// TestTurnHandoffChain: five Lockers wait for a name, each acquiring only
// when its waiter is woken (or every two seconds, as lease.Run would);
// each holds it briefly and releases it. Every one gets it, and the test
// logs how many attempts each handoff cost.
func TestTurnHandoffChain(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	holder := s.openLocker(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const name, waiters = "chain", 5
	held, err := holder.Acquire(ctx, name, "h", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var (
		attempts atomic.Int64
		got      atomic.Int64
		wg       sync.WaitGroup
		ready    sync.WaitGroup
	)
	ready.Add(waiters)
	for i := range waiters {
		l := s.openLocker(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := linetest.New(l, name, false, 0)
			defer w.Stop()
			owner := fmt.Sprint("w", i)
			first := true
			for range 100 {
				attempts.Add(1)
				ls, err := w.Acquire(ctx, owner, time.Minute)
				if first {
					first = false
					ready.Done()
				}
				if err == nil {
					w.Done(true)
					got.Add(1)
					time.Sleep(5 * time.Millisecond)
					if err := l.Release(ctx, ls); err != nil {
						t.Error(err)
					}
					return
				}
				if !errors.Is(err, lease.ErrHeld) {
					t.Error(err)
					return
				}
				select {
				case <-w.Changed():
				case <-time.After(2 * time.Second):
				case <-ctx.Done():
					t.Errorf("waiter %d: %v", i, ctx.Err())
					return
				}
			}
		}()
	}
	ready.Wait()
	attempts.Store(0)
	if err := holder.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got.Load() != waiters {
		t.Fatalf("%d of %d waiters held the name", got.Load(), waiters)
	}
	t.Logf("%d attempts for %d handoffs", attempts.Load(), waiters)
	if n := s.allMarks(t); n != 0 {
		t.Errorf("%d marks left after every waiter held the name", n)
	}
}

// TestAcquireOrWaitIsNotBatched: while every Acquire turn is taken, plain
// Acquires queue to share a takeover statement, but an AcquireOrWait
// waits for a turn of its own instead: a shared statement knows no marks.
// So one that acquires then removes the mark its waiter placed before
// (in a shared statement it would have stayed), and one that finds its
// name held places its mark.
func TestAcquireOrWaitIsNotBatched(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	l := s.openLocker(t, WithPoolSize(8, 2))
	ctx := t.Context()
	const plain = 5
	// w1 waited for nb/free while another owner held it: its mark is
	// there when the name comes free.
	held, err := l.Acquire(ctx, "nb/free", "other", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := l.s.AcquireOrWait(ctx, "nb/free", "me", time.Minute, driver.Mark{Waiter: "w1", Life: testMarkLife}); err != nil || got.Owner != "other" {
		t.Fatalf("busy AcquireOrWait: %+v, %v; want the holder", got, err)
	}
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	if n := s.markCount(t, "nb/free"); n != 1 {
		t.Fatalf("%d marks on the freed name, want w1's", n)
	}
	if _, err := l.Acquire(ctx, "nb/held", "other", time.Minute); err != nil {
		t.Fatal(err)
	}
	if !l.s.batches() {
		t.Fatal("PostgreSQL does not batch Acquires")
	}
	for range cap(l.s.acquireSlots) {
		l.s.acquireSlots <- struct{}{}
	}
	batches := l.s.acquireBatches.Load()
	type answer struct {
		t   driver.Tenure
		err error
	}
	free, busy := make(chan answer, 1), make(chan answer, 1)
	wait := func(name, waiter string, to chan<- answer) {
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		got, err := l.s.AcquireOrWait(c, name, "me", time.Minute, driver.Mark{Waiter: waiter, Life: testMarkLife})
		to <- answer{got, err}
	}
	go wait("nb/free", "w1", free)
	go wait("nb/held", "w2", busy)
	errs := make([]error, plain)
	var wg sync.WaitGroup
	for i := range plain {
		wg.Go(func() {
			c, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, errs[i] = l.s.Acquire(c, fmt.Sprint("nb/plain/", i), "me", time.Minute)
		})
	}
	// Every call waits: both AcquireOrWaits for a turn of their own, and
	// the plain Acquires, and only they, to share a statement.
	for deadline := time.Now().Add(10 * time.Second); l.s.slotWaiters.Load()+int64(l.s.acquires.Waiting()) != plain+2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls wait for a turn and %d to share a statement; want %d in all", l.s.slotWaiters.Load(), l.s.acquires.Waiting(), plain+2)
		}
	}
	if n := l.s.slotWaiters.Load(); n != 2 {
		t.Errorf("%d calls wait for a turn and %d to share a statement; want the 2 AcquireOrWaits and the %d Acquires", n, l.s.acquires.Waiting(), plain)
	}
	for range cap(l.s.acquireSlots) {
		<-l.s.acquireSlots
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Acquire of nb/plain/%d: %v", i, err)
		}
	}
	if n := l.s.acquireBatches.Load() - batches; n < 1 {
		t.Error("the plain Acquires did not share a statement")
	}
	timeout := time.After(30 * time.Second)
	for _, ch := range []chan answer{free, busy} {
		select {
		case a := <-ch:
			if ch == free && (a.err != nil || a.t.Owner != "me") {
				t.Errorf("AcquireOrWait of the free name: %+v, %v; want it to acquire", a.t, a.err)
			}
			if ch == busy && (a.err != nil || a.t.Owner != "other") {
				t.Errorf("AcquireOrWait of the held name: %+v, %v; want the holder", a.t, a.err)
			}
		case <-timeout:
			t.Fatal("an AcquireOrWait did not return within 30s of the turns coming free")
		}
	}
	if n := s.markCount(t, "nb/free"); n != 0 {
		t.Errorf("%d marks on nb/free after w1's AcquireOrWait acquired it while every turn was taken, want none", n)
	}
	if n := s.markCount(t, "nb/held"); n != 1 {
		t.Errorf("%d marks on nb/held after w2's busy AcquireOrWait, want 1", n)
	}
}

// TestStopWaitingPassesTheTurn: a waiter whose mark was first stops
// waiting on a free name (the release chose it, and it gave up): its
// StopWaiting wakes the next marked Locker. While the name is held, or
// when the mark was not first, StopWaiting wakes no one.
func TestStopWaitingPassesTheTurn(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	holder, a, b, c := s.openLocker(t), s.openLocker(t), s.openLocker(t), s.openLocker(t)
	ctx := t.Context()
	const name = "pass"
	held, err := holder.Acquire(ctx, name, "h", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var ws []*linetest.Waiter
	for i, l := range []*Locker{a, b, c} {
		w := waitIn(t, l, name)
		ws = append(ws, w)
		_, err := w.Acquire(ctx, fmt.Sprint(i), time.Minute)
		isHeldErr(t, err, "h", fmt.Sprint("waiter ", i))
	}
	drainAll(ws[0], ws[1], ws[2])
	ws[1].Stop() // b, not first, stops while the name is held
	noWake(t, ws[2], 300*time.Millisecond, "a waiter that was not first stopped waiting on a held name")
	if err := holder.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	waitWake(t, ws[0], 5*time.Second, "a release, a's mark first")
	noWake(t, ws[2], 300*time.Millisecond, "a release that chose a's mark")
	ws[0].Stop() // a gives its turn up
	waitWake(t, ws[2], 5*time.Second, "the chosen waiter giving up on a free name")
	if n := s.markCount(t, name); n != 1 {
		t.Fatalf("%d marks, want c's alone", n)
	}
}
