package sqllease

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// The tests of the fair policy over the one line of waiters (Mark.Fair,
// postgresAcquireOrWait) on the real PostgreSQL server of
// LEASE_TEST_POSTGRES.

// testMarkLife is the mark life these tests give AcquireOrWait (the
// driver's value scales with the caller's ttl).
const testMarkLife = 5 * time.Second

// fairMark is the Mark of a fair AcquireOrWait by waiter.
func fairMark(waiter string) driver.Mark {
	return driver.Mark{Waiter: waiter, Life: testMarkLife, Fair: true}
}

// placeMarks has each waiter place its mark on name, in order, with a busy
// AcquireOrWait while holder holds it, then releases the name.
func placeMarks(t *testing.T, l *Locker, name string, waiters ...string) {
	t.Helper()
	ctx := t.Context()
	held, err := l.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range waiters {
		got, err := l.s.AcquireOrWait(ctx, name, "o-"+w, time.Minute, fairMark(w))
		if err != nil || got.Owner != "holder" {
			t.Fatalf("busy AcquireOrWait of %s: %+v, %v; want the holder", w, got, err)
		}
	}
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
}

// isFree fails t unless name has no unexpired tenure.
func isFree(t *testing.T, l *Locker, name, after string) {
	t.Helper()
	if got, ok, err := l.s.Inspect(t.Context(), name); err != nil || ok {
		t.Fatalf("after %s the name is held by %+v (%v), want it free", after, got, err)
	}
}

// TestFairWaitsItsTurn: a fair AcquireOrWait of a free name acquires
// nothing while another waiter's live mark is ahead of the caller's, or
// when the caller has none; it keeps (or places) the caller's mark, and
// answers an empty Owner with the first mark's time left by the
// database's clock, in one statement. The first in line acquires, and
// then the next. A plain AcquireOrWait or Acquire is not held back, and
// a holder re-enters whatever the line.
func TestFairWaitsItsTurn(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	var c counter
	l, err := New(countingDB(t, s, &c), s.baseOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := t.Context()
	const name = "fair"
	placeMarks(t, l, name, "w1", "w2")
	_, lapse1, _, _ := s.markRow(t, name, "w1")
	p2, lapse2, _, _ := s.markRow(t, name, "w2")

	// w2, behind w1.
	c.take()
	got, err := l.s.AcquireOrWait(ctx, name, "o-w2", time.Minute, fairMark("w2"))
	if err != nil {
		t.Fatal(err)
	}
	if stmts, txs := c.take(); len(stmts) != 1 || txs != 0 {
		t.Errorf("a fair AcquireOrWait sent %d statements and %d transactions, want 1 and 0", len(stmts), txs)
	}
	_, _, now, _ := s.markRow(t, name, "w1")
	if got.Owner != "" || got.Token != 0 || !got.Expires.Equal(time.UnixMilli(lapse1)) {
		t.Fatalf("fair AcquireOrWait behind w1: %+v; want no owner, token 0 and w1's lapse %d as Expires", got, lapse1)
	}
	if left := time.Duration(lapse1-now) * time.Millisecond; got.Remaining <= 0 || got.Remaining < left || got.Remaining > testMarkLife {
		t.Errorf("Remaining %s, want w1's mark's time left (%s when read after) at most %s", got.Remaining, left, testMarkLife)
	}
	isFree(t, l, name, "a fair AcquireOrWait behind another mark")
	if p, lapse, _, ok := s.markRow(t, name, "w2"); !ok || p != p2 || lapse <= lapse2 {
		t.Errorf("w2's mark: placed %d, lapses %d, present %v; want its place %d kept and its lapse moved past %d", p, lapse, ok, p2, lapse2)
	}

	// w3, without a mark, is behind every live mark: it gets one, at the
	// back.
	got, err = l.s.AcquireOrWait(ctx, name, "o-w3", time.Minute, fairMark("w3"))
	if err != nil || got.Owner != "" || !got.Expires.Equal(time.UnixMilli(lapse1)) {
		t.Fatalf("fair AcquireOrWait without a mark: %+v, %v; want no owner and w1's lapse", got, err)
	}
	p3, _, _, ok := s.markRow(t, name, "w3")
	if !ok || p3 <= p2 {
		t.Fatalf("w3's mark: placed %d, present %v; want it placed after w2's (%d)", p3, ok, p2)
	}
	isFree(t, l, name, "a fair AcquireOrWait without a mark")

	// w1, first, acquires and leaves the line.
	held, err := l.s.AcquireOrWait(ctx, name, "o-w1", time.Minute, fairMark("w1"))
	if err != nil || held.Owner != "o-w1" || held.Token == 0 {
		t.Fatalf("fair AcquireOrWait of the first in line: %+v, %v; want it to acquire", held, err)
	}
	if _, _, _, ok := s.markRow(t, name, "w1"); ok {
		t.Error("w1's mark is still there after it acquired")
	}
	// Held, the line changes nothing for the holder: a fair re-entry
	// extends its own tenure though w2 is first.
	again, err := l.s.AcquireOrWait(ctx, name, "o-w1", time.Minute, fairMark("w1"))
	if err != nil || again.Owner != "o-w1" || again.Token != held.Token {
		t.Fatalf("fair re-entry by the holder: %+v, %v; want its tenure, token %d", again, err, held.Token)
	}
	// And a fair waiter behind sees the holder, as for a held name.
	got, err = l.s.AcquireOrWait(ctx, name, "o-w3", time.Minute, fairMark("w3"))
	if err != nil || got.Owner != "o-w1" || got.Remaining <= 0 {
		t.Fatalf("fair AcquireOrWait of a held name: %+v, %v; want the holder", got, err)
	}
	if err := l.Release(ctx, lease.Lease{Name: name, Owner: "o-w1", Token: held.Token}); err != nil {
		t.Fatal(err)
	}

	// w3 is still behind w2; w2 is now first and acquires.
	got, err = l.s.AcquireOrWait(ctx, name, "o-w3", time.Minute, fairMark("w3"))
	if err != nil || got.Owner != "" {
		t.Fatalf("fair AcquireOrWait of w3 behind w2: %+v, %v; want no owner", got, err)
	}
	if _, lapseW2, _, _ := s.markRow(t, name, "w2"); !got.Expires.Equal(time.UnixMilli(lapseW2)) {
		t.Errorf("Expires %s, want w2's mark's lapse %s", got.Expires, time.UnixMilli(lapseW2))
	}
	held, err = l.s.AcquireOrWait(ctx, name, "o-w2", time.Minute, fairMark("w2"))
	if err != nil || held.Owner != "o-w2" {
		t.Fatalf("fair AcquireOrWait of w2, first now: %+v, %v; want it to acquire", held, err)
	}
	if err := l.Release(ctx, lease.Lease{Name: name, Owner: "o-w2", Token: held.Token}); err != nil {
		t.Fatal(err)
	}

	// The default policy and plain Acquire are not held back by w3's
	// mark.
	plain := driver.Mark{Waiter: "w4", Life: testMarkLife}
	got, err = l.s.AcquireOrWait(ctx, name, "o-w4", time.Minute, plain)
	if err != nil || got.Owner != "o-w4" {
		t.Fatalf("AcquireOrWait without Fair behind w3: %+v, %v; want it to acquire", got, err)
	}
	if err := l.Release(ctx, lease.Lease{Name: name, Owner: "o-w4", Token: got.Token}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, name, "o-plain", time.Minute); err != nil {
		t.Fatalf("Acquire with w3 in line: %v", err)
	}
	if _, _, _, ok := s.markRow(t, name, "w3"); !ok {
		t.Error("w3's mark went away though w3 never acquired")
	}
}

// TestFairLineIsLiveMarks: a lapsed mark, though placed first, is out of
// the line: a fair waiter behind it acquires; and a waiter whose own mark
// lapsed is behind every live mark, its mark placed anew at the back.
// Mark lives have millisecond precision (rounded up): the lapse is the
// statement's now plus the life.
func TestFairLineIsLiveMarks(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	l := s.newLocker(t)
	ctx := t.Context()
	const name = "fair-lapsed"
	short := 100*time.Millisecond + 400*time.Microsecond // 101ms, rounded up
	held, err := l.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.s.AcquireOrWait(ctx, name, "o-a", time.Minute, driver.Mark{Waiter: "a", Life: short, Fair: true}); err != nil {
		t.Fatal(err)
	}
	pa, lapseA, _, ok := s.markRow(t, name, "a")
	if !ok || lapseA-pa/1000 != 101 {
		t.Fatalf("a's mark: placed %dµs, lapses %dms (present %v); want it to lapse 101ms after it was placed", pa, lapseA, ok)
	}
	if _, err := l.s.AcquireOrWait(ctx, name, "o-b", time.Minute, fairMark("b")); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, _, now, _ := s.markRow(t, name, "b"); now > lapseA {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a's mark has not lapsed by the database's clock after 5s")
		}
	}
	// a's mark lapsed: a is behind b now, and gets a new place at the back.
	got, err := l.s.AcquireOrWait(ctx, name, "o-a", time.Minute, driver.Mark{Waiter: "a", Life: short, Fair: true})
	if err != nil || got.Owner != "" {
		t.Fatalf("fair AcquireOrWait of a, its mark lapsed, b's live: %+v, %v; want no owner", got, err)
	}
	pb, _, _, _ := s.markRow(t, name, "b")
	if pa2, _, _, ok := s.markRow(t, name, "a"); !ok || pa2 <= pb {
		t.Errorf("a's mark after it lapsed: placed %d, present %v; want it placed anew after b's (%d)", pa2, ok, pb)
	}
	// b is first among the live marks.
	got, err = l.s.AcquireOrWait(ctx, name, "o-b", time.Minute, fairMark("b"))
	if err != nil || got.Owner != "o-b" {
		t.Fatalf("fair AcquireOrWait of b, first live mark: %+v, %v; want it to acquire", got, err)
	}
	if err := l.Release(ctx, lease.Lease{Name: name, Owner: "o-b", Token: got.Token}); err != nil {
		t.Fatal(err)
	}
	// With every mark lapsed, the line is empty and a fair waiter acquires.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, lapse, now, ok := s.markRow(t, name, "a")
		if !ok || now > lapse {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a's mark has not lapsed by the database's clock after 5s")
		}
	}
	got, err = l.s.AcquireOrWait(ctx, name, "o-c", time.Minute, fairMark("c"))
	if err != nil || got.Owner != "o-c" {
		t.Fatalf("fair AcquireOrWait with only lapsed marks: %+v, %v; want it to acquire", got, err)
	}
}

// TestFairStopWaitingPassesTheTurn: the first waiter giving up on a free
// name (StopWaiting) wakes the next marked waiter's turn watch and no
// other, and the line moves: the next fair waiter acquires. With no mark
// left, giving up wakes every turn watch, as a release with no mark does.
func TestFairStopWaitingPassesTheTurn(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	l := s.newLocker(t)
	ctx := t.Context()
	const name = "fair-pass"
	var ws []driver.Watch
	for _, w := range []string{"w1", "w2", "w3"} {
		wt, err := l.s.WatchTurn(ctx, name, w)
		if err != nil {
			t.Fatal(err)
		}
		defer wt.Stop()
		ws = append(ws, wt)
	}
	placeMarks(t, l, name, "w1", "w2") // w3 watches without a mark
	waitWake(t, ws[0], 5*time.Second, "a release, w1's mark first")
	noWake(t, ws[1], 300*time.Millisecond, "a release that chose w1")
	noWake(t, ws[2], 50*time.Millisecond, "a release that chose w1")
	if got, err := l.s.AcquireOrWait(ctx, name, "o-w2", time.Minute, fairMark("w2")); err != nil || got.Owner != "" {
		t.Fatalf("fair AcquireOrWait of w2 behind w1: %+v, %v; want no owner", got, err)
	}
	drainAll(ws...)
	if err := l.s.StopWaiting(ctx, name, "w1"); err != nil {
		t.Fatal(err)
	}
	waitWake(t, ws[1], 5*time.Second, "w1, first, giving up on a free name")
	noWake(t, ws[2], 300*time.Millisecond, "w1 giving up, the turn passed to w2")
	noWake(t, ws[0], 50*time.Millisecond, "w1 giving up, the turn passed to w2")
	got, err := l.s.AcquireOrWait(ctx, name, "o-w2", time.Minute, fairMark("w2"))
	if err != nil || got.Owner != "o-w2" {
		t.Fatalf("fair AcquireOrWait of w2 after w1 gave up: %+v, %v; want it to acquire", got, err)
	}
	if n := s.markCount(t, name); n != 0 {
		t.Fatalf("%d marks after w2 acquired, want none", n)
	}

	// w3 gets the only mark while w2 holds; after the release it is
	// chosen, and gives up: nobody is left in line, so every turn watch
	// wakes.
	if got, err := l.s.AcquireOrWait(ctx, name, "o-w3", time.Minute, fairMark("w3")); err != nil || got.Owner != "o-w2" {
		t.Fatalf("fair AcquireOrWait of w3 while w2 holds: %+v, %v; want the holder", got, err)
	}
	drainAll(ws...)
	if err := l.Release(ctx, lease.Lease{Name: name, Owner: "o-w2", Token: got.Token}); err != nil {
		t.Fatal(err)
	}
	waitWake(t, ws[2], 5*time.Second, "a release, w3's mark the only one")
	noWake(t, ws[0], 300*time.Millisecond, "a release that chose w3")
	drainAll(ws...)
	if err := l.s.StopWaiting(ctx, name, "w3"); err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		waitWake(t, w, 5*time.Second, fmt.Sprintf("the last waiter giving up (watch %d)", i))
	}
}

// TestFairAcquireOrWaitIsNotBatched: while every Acquire turn is taken,
// a fair AcquireOrWait waits for a turn of its own instead of sharing a
// takeover statement (which knows no line), so it still waits behind the
// first mark.
func TestFairAcquireOrWaitIsNotBatched(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	l := s.openLocker(t, WithPoolSize(8, 2))
	ctx := t.Context()
	const name = "fair-burst"
	placeMarks(t, l, name, "w1")
	if !l.s.batches() {
		t.Fatal("PostgreSQL does not batch Acquires")
	}
	for range cap(l.s.acquireSlots) {
		l.s.acquireSlots <- struct{}{}
	}
	type answer struct {
		t   driver.Tenure
		err error
	}
	done := make(chan answer, 1)
	go func() {
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		t, err := l.s.AcquireOrWait(c, name, "o-w2", time.Minute, fairMark("w2"))
		done <- answer{t, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); l.s.slotWaiters.Load() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls wait for an Acquire turn, want the fair AcquireOrWait", l.s.slotWaiters.Load())
		}
	}
	queued := l.s.acquires.Waiting()
	for range cap(l.s.acquireSlots) {
		<-l.s.acquireSlots
	}
	var a answer
	select {
	case a = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the fair AcquireOrWait did not return within 30s of the turns coming free")
	}
	if queued != 0 {
		t.Errorf("%d Acquires queued for a shared statement, want the fair AcquireOrWait to wait for a turn", queued)
	}
	if a.err != nil || a.t.Owner != "" {
		t.Fatalf("fair AcquireOrWait behind w1 in a burst: %+v, %v; want no owner", a.t, a.err)
	}
	isFree(t, l, name, "a fair AcquireOrWait in a burst")
}
