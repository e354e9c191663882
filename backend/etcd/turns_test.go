package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/faultproxy"
	"github.com/leasekit/lease/internal/linetest"
	"github.com/leasekit/lease/internal/testenv"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// turnLockers returns n Lockers on one prefix, each on a client of its
// own with its own wire.
func turnLockers(t *testing.T, n int) ([]*Locker, []*wire) {
	t.Helper()
	prefix := randomPrefix()
	ls, ws := make([]*Locker, n), make([]*wire, n)
	for i := range n {
		ws[i] = newWire()
		ls[i] = mustNew(t, newClient(t, testEndpoints, ws[i]), WithPrefix(prefix))
	}
	return ls, ws
}

// heldWithTwoTurnWatches makes three Lockers on a new name (tagged
// tag): the first holds it for a minute, and the second and third each
// have a turn Watch on it, for waiters "waiter-a" and "waiter-b".
func heldWithTwoTurnWatches(t *testing.T, tag string) (ls []*Locker, wires []*wire, name string, held lease.Lease, wA, wB driver.Watch) {
	t.Helper()
	ls, wires = turnLockers(t, 3)
	name = uniqueName(tag)
	wA, wB = turnWatch(t, ls[1], name, "waiter-a"), turnWatch(t, ls[2], name, "waiter-b")
	held, err := ls[0].Acquire(t.Context(), name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return ls, wires, name, held, wA, wB
}

// turnWatch starts waiter's turn Watch of name on l, stopped when t ends.
func turnWatch(t *testing.T, l *Locker, name, waiter string) driver.Watch {
	t.Helper()
	w, err := l.s.WatchTurn(t.Context(), name, waiter)
	if err != nil {
		t.Fatalf("WatchTurn(%q, %q): %v", name, waiter, err)
	}
	t.Cleanup(w.Stop)
	return w
}

// wait is AcquireOrWait of name by owner for waiter, which must find it
// held by another owner.
func wait(t *testing.T, l *Locker, name, owner, waiter string, keep bool) {
	t.Helper()
	got, err := l.s.AcquireOrWait(t.Context(), name, owner, time.Minute, driver.Mark{Waiter: waiter, Life: markLife, Keep: keep})
	if err != nil {
		t.Fatalf("AcquireOrWait(%q, %q): %v", name, owner, err)
	}
	if got.Owner == owner {
		t.Fatalf("AcquireOrWait(%q, %q) acquired; want it held by another owner", name, owner)
	}
}

// take is AcquireOrWait of name by owner for waiter, which must acquire.
func take(t *testing.T, l *Locker, name, owner, waiter string, keep bool) driver.Tenure {
	t.Helper()
	got, err := l.s.AcquireOrWait(t.Context(), name, owner, time.Minute, driver.Mark{Waiter: waiter, Life: markLife, Keep: keep})
	if err != nil {
		t.Fatalf("AcquireOrWait(%q, %q): %v", name, owner, err)
	}
	if got.Owner != owner || got.Token == 0 {
		t.Fatalf("AcquireOrWait(%q, %q) = %+v; want it acquired", name, owner, got)
	}
	return got
}

// marksOf reads the marks of name, oldest first.
func marksOf(t *testing.T, l *Locker, name string) []*mvccpb.KeyValue {
	t.Helper()
	r, err := l.s.client.Get(t.Context(), l.s.marksPrefix(name), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	return r.Kvs
}

// waitersOf are the waiters of name's marks, oldest first.
func waitersOf(t *testing.T, l *Locker, name string) []string {
	t.Helper()
	var out []string
	for _, kv := range marksOf(t, l, name) {
		out = append(out, markWaiter(string(kv.Key), l.s.marksPrefix(name)))
	}
	return out
}

// quietFor fails t if c receives within d.
func quietFor(t *testing.T, c <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-c:
		t.Fatalf("%s was woken", what)
	case <-time.After(d):
	}
}

const turnQuiet = 300 * time.Millisecond

// markLife is the life of the marks the tests' waiters place.
const markLife = 5 * time.Second

// TestTurnWakesOnlyTheOldestMark: a Release, a ForceRelease and an expiry
// each wake the turn Watch of the Locker whose mark is oldest, and no
// other turn Watch (not one of a Locker without a mark either), while a
// plain Watch wakes every time; the Locker that takes its turn loses its
// mark, so the next release wakes the next one.
func TestTurnWakesOnlyTheOldestMark(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	ls, _ := turnLockers(t, 4)
	holder, a, b, c := ls[0], ls[1], ls[2], ls[3]
	ctx := t.Context()
	name := uniqueName("turn")
	wA, wB, wC := turnWatch(t, a, name, "waiter-a"), turnWatch(t, b, name, "waiter-b"), turnWatch(t, c, name, "waiter-c")
	plain, err := c.Watch(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()
	all := []driver.Watch{wA, wB, wC, plain}
	drainAll := func() {
		for _, w := range all {
			drain(w.Changed())
		}
	}
	held, err := holder.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, a, name, "owner-a", "waiter-a", false)
	wait(t, b, name, "owner-b", "waiter-b", false)
	wait(t, a, name, "owner-a", "waiter-a", false) // renewing keeps the place
	if got := waitersOf(t, a, name); len(got) != 2 || got[0] != "waiter-a" || got[1] != "waiter-b" {
		t.Fatalf("marks %v, want [waiter-a waiter-b]", got)
	}
	drainAll()
	if err := holder.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	wakeWithin(t, wA.Changed(), 5*time.Second, "a's turn Watch (oldest mark) at a Release")
	wakeWithin(t, plain.Changed(), 5*time.Second, "a plain Watch at a Release")
	quietFor(t, wB.Changed(), turnQuiet, "b's turn Watch (newer mark) at a Release")
	quietFor(t, wC.Changed(), 0, "c's turn Watch (no mark) at a Release")

	gotA := take(t, a, name, "owner-a", "waiter-a", false)
	if got := waitersOf(t, a, name); len(got) != 1 || got[0] != "waiter-b" {
		t.Fatalf("marks after a took its turn: %v, want [waiter-b]", got)
	}
	drainAll()
	if ok, err := a.s.Release(ctx, gotA); err != nil || !ok {
		t.Fatal(err)
	}
	wakeWithin(t, wB.Changed(), 5*time.Second, "b's turn Watch (the only mark) at a Release")
	wakeWithin(t, plain.Changed(), 5*time.Second, "a plain Watch at a Release")
	quietFor(t, wA.Changed(), turnQuiet, "a's turn Watch (its mark went when it acquired)")
	quietFor(t, wC.Changed(), 0, "c's turn Watch (no mark)")

	// A ForceRelease: b's mark is still the oldest.
	if _, err := holder.Acquire(ctx, name, "holder", time.Minute); err != nil {
		t.Fatal(err)
	}
	wait(t, a, name, "owner-a", "waiter-a", false)
	wait(t, b, name, "owner-b", "waiter-b", false)
	drainAll()
	if _, ok, err := holder.s.ForceRelease(ctx, name); err != nil || !ok {
		t.Fatalf("ForceRelease: %v, %v", ok, err)
	}
	wakeWithin(t, wB.Changed(), 5*time.Second, "b's turn Watch (oldest mark) at a ForceRelease")
	wakeWithin(t, plain.Changed(), 5*time.Second, "a plain Watch at a ForceRelease")
	quietFor(t, wA.Changed(), turnQuiet, "a's turn Watch (newer mark) at a ForceRelease")

	// An expiry: etcd deletes the key when its lease ends.
	ttl := shortestTTL(t, testEndpoints)
	if _, err := holder.Acquire(ctx, name, "holder", ttl); err != nil {
		t.Fatal(err)
	}
	wait(t, b, name, "owner-b", "waiter-b", false)
	wait(t, a, name, "owner-a", "waiter-a", false)
	drainAll()
	wakeWithin(t, wB.Changed(), ttl+5*time.Second, "b's turn Watch (oldest mark) at an expiry")
	quietFor(t, wA.Changed(), turnQuiet, "a's turn Watch (newer mark) at an expiry")
	quietFor(t, wC.Changed(), 0, "c's turn Watch (no mark) at an expiry")
}

// TestAcquireOrWaitMarksInOneTransaction: a busy AcquireOrWait places the
// mark in its one transaction, on an etcd lease of its life; the next
// one, by a Locker that knows the name held, writes nothing and keeps
// the mark's place; the one that acquires takes the mark away in its
// transaction, or, with Keep, puts it at the back of the line.
func TestAcquireOrWaitMarksInOneTransaction(t *testing.T) {
	t.Parallel()
	ls, ws := turnLockers(t, 3)
	holder, a, b := ls[0], ls[1], ls[2]
	ctx := t.Context()
	name := uniqueName("marks")
	held, err := holder.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a.settle()
	ws[1].take()
	wait(t, a, name, "owner-a", "waiter-a", false)
	if m, n := ws[1].take(); n == 0 || ws[1].count(m, "Txn") != 1 {
		t.Fatalf("a busy AcquireOrWait sent %v, want one Txn", m)
	}
	first := marksOf(t, a, name)
	if len(first) != 1 || first[0].Lease == 0 {
		t.Fatalf("marks after a busy AcquireOrWait: %v, want one on an etcd lease", first)
	}
	ttl, err := a.s.client.TimeToLive(ctx, clientv3.LeaseID(first[0].Lease))
	if err != nil {
		t.Fatal(err)
	}
	if life := int64(markLife / time.Second); ttl.TTL <= 0 || ttl.TTL > life || ttl.GrantedTTL != life {
		t.Fatalf("the mark's lease: TTL %d of %d, want at most %d of %d", ttl.TTL, ttl.GrantedTTL, life, life)
	}
	rev := first[0].ModRevision
	wait(t, a, name, "owner-a", "waiter-a", false)
	again := marksOf(t, a, name)
	if len(again) != 1 || again[0].CreateRevision != first[0].CreateRevision || again[0].ModRevision != rev {
		t.Fatalf("a second busy AcquireOrWait changed the mark: %v, then %v", first, again)
	}
	wait(t, b, name, "owner-b", "waiter-b", false)

	// a's turn Watch sees the release, so a knows the name is free.
	wA := turnWatch(t, a, name, "waiter-a")
	if err := holder.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	wakeWithin(t, wA.Changed(), 5*time.Second, "a's turn Watch")
	ws[1].take()
	gotA := take(t, a, name, "owner-a", "waiter-a", true)
	if m, _ := ws[1].take(); ws[1].count(m, "Txn") != 1 {
		t.Fatalf("an AcquireOrWait that acquired sent %v, want one Txn", m)
	}
	if got := waitersOf(t, a, name); len(got) != 2 || got[0] != "waiter-b" || got[1] != "waiter-a" {
		t.Fatalf("marks after a acquired with Keep: %v, want [waiter-b waiter-a]", got)
	}
	if ok, err := a.s.Release(ctx, gotA); err != nil || !ok {
		t.Fatal(err)
	}
	gotB := take(t, b, name, "owner-b", "waiter-b", false)
	if got := waitersOf(t, a, name); len(got) != 1 || got[0] != "waiter-a" {
		t.Fatalf("marks after b acquired: %v, want [waiter-a]", got)
	}
	// Re-entry takes the mark away too.
	wait(t, b, name, "owner-b2", "waiter-b", false)
	if got := waitersOf(t, a, name); len(got) != 2 {
		t.Fatalf("marks after b waited again: %v, want two", got)
	}
	if got := take(t, b, name, "owner-b", "waiter-b", false); got.Token != gotB.Token {
		t.Fatalf("re-entry: token %d, want %d", got.Token, gotB.Token)
	}
	if got := waitersOf(t, a, name); len(got) != 1 || got[0] != "waiter-a" {
		t.Fatalf("marks after b re-entered: %v, want [waiter-a]", got)
	}
}

// count is how many calls of method the summary m (from take) lists.
func (w *wire) count(m string, method string) int {
	for _, part := range strings.Fields(m) {
		if k, v, ok := strings.Cut(part, "×"); ok && k == method {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// TestLapsedMarkIsSkipped: a mark its waiter stops renewing ends with its
// etcd lease, by etcd's clock, and a release then wakes the Locker whose
// newer mark lives.
func TestLapsedMarkIsSkipped(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	ls, _, name, held, wA, wB := heldWithTwoTurnWatches(t, "lapse")
	holder, a, b := ls[0], ls[1], ls[2]
	ctx := t.Context()
	if _, err := a.s.AcquireOrWait(ctx, name, "owner-a", time.Minute, driver.Mark{Waiter: "waiter-a", Life: time.Second}); !errors.Is(err, nil) {
		t.Fatal(err)
	}
	wait(t, b, name, "owner-b", "waiter-b", false)
	deadline := time.Now().Add(10 * time.Second)
	for len(marksOf(t, a, name)) > 1 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if got := waitersOf(t, a, name); len(got) != 1 || got[0] != "waiter-b" {
		t.Fatalf("marks once a's lapsed: %v, want [waiter-b]", got)
	}
	drain(wA.Changed())
	drain(wB.Changed())
	if err := holder.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	wakeWithin(t, wB.Changed(), 5*time.Second, "b's turn Watch (the live mark)")
	quietFor(t, wA.Changed(), turnQuiet, "a's turn Watch (its mark lapsed)")
}

// TestStopWaitingRemovesTheMark: StopWaiting deletes the waiter's mark,
// and so does the Locker's last turn Watch of a name when it stops; a
// release then wakes the next waiter.
func TestStopWaitingRemovesTheMark(t *testing.T) {
	t.Parallel()
	ls, _, name, held, wA, wB := heldWithTwoTurnWatches(t, "stop")
	holder, a, b := ls[0], ls[1], ls[2]
	ctx := t.Context()
	wait(t, a, name, "owner-a", "waiter-a", false)
	wait(t, b, name, "owner-b", "waiter-b", false)
	if err := a.s.StopWaiting(ctx, name, "waiter-a"); err != nil {
		t.Fatal(err)
	}
	if got := waitersOf(t, a, name); len(got) != 1 || got[0] != "waiter-b" {
		t.Fatalf("marks after StopWaiting: %v, want [waiter-b]", got)
	}
	if err := a.s.StopWaiting(ctx, name, "waiter-a"); err != nil {
		t.Fatalf("StopWaiting without a mark: %v", err)
	}
	drain(wA.Changed())
	drain(wB.Changed())
	if err := holder.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	wakeWithin(t, wB.Changed(), 5*time.Second, "b's turn Watch")
	quietFor(t, wA.Changed(), turnQuiet, "a's turn Watch (it stopped waiting)")

	// Through the Locker: its last waiter's giving up takes its mark away.
	name = uniqueName("stop-locker")
	if _, err := holder.Acquire(ctx, name, "holder", time.Minute); err != nil {
		t.Fatal(err)
	}
	w := linetest.New(a, name, false, 0)
	if _, err := w.Acquire(ctx, "owner-a", time.Minute); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("a waiting Acquire of a held name: %v, want ErrHeld", err)
	}
	if got := marksOf(t, a, name); len(got) != 1 {
		t.Fatalf("marks after the Locker's waiting Acquire: %v, want one", got)
	}
	w.Stop()
	if got := marksOf(t, a, name); len(got) != 0 {
		t.Fatalf("marks after the Locker's last waiter gave up: %v, want none", got)
	}
}

// TestTurnWithoutMarksWakesAll: with no mark, a release wakes every turn
// Watch, of every Locker.
func TestTurnWithoutMarksWakesAll(t *testing.T) {
	t.Parallel()
	ls, _ := turnLockers(t, 3)
	holder := ls[0]
	ctx := t.Context()
	name := uniqueName("nomark")
	ws := []driver.Watch{turnWatch(t, ls[1], name, "waiter-a"), turnWatch(t, ls[2], name, "waiter-b"), turnWatch(t, ls[2], name, "waiter-c")}
	held, err := holder.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		drain(w.Changed())
	}
	if err := holder.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		wakeWithin(t, w.Changed(), 5*time.Second, "a turn Watch at a release with no mark")
	}
}

// TestTurnWatchWakesAfterADroppedConnection: a waiter whose connection
// is reset while the name is released is woken once its client is back:
// clientv3 resumes the watches from their last revision, so the release
// is not missed (and a watch that cannot resume is set up again, with a
// wake-up).
func TestTurnWatchWakesAfterADroppedConnection(t *testing.T) {
	t.Parallel()
	ls, _ := turnLockers(t, 1)
	holder := ls[0]
	p := faultproxy.StartT(t, testEndpoints[0])
	a := mustNew(t, newClient(t, []string{p.Addr()}, nil), WithPrefix(holder.s.prefix))
	ctx := t.Context()
	name := uniqueName("dropped")
	w := turnWatch(t, a, name, "waiter-a")
	held, err := holder.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, a, name, "owner-a", "waiter-a", false)
	drain(w.Changed())
	p.Stall(faultproxy.Both)
	p.Reset()
	if err := holder.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	p.Clear()
	wakeWithin(t, w.Changed(), 10*time.Second, "a turn Watch whose connection was reset at the release")
}

// TestMarksLeaveNothingBehind: waiters that give up leave no mark (with
// StopWaiting) or marks that end with their etcd lease (a Locker that
// closed), and no key under the prefix lacks an etcd lease.
func TestMarksLeaveNothingBehind(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	ls, _ := turnLockers(t, 3)
	holder, a, b := ls[0], ls[1], ls[2]
	ctx := t.Context()
	name := uniqueName("behind")
	held, err := holder.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range []*Locker{a, b} {
		turnWatch(t, l, name, "waiter-"+strconv.Itoa(i))
		wait(t, l, name, "owner", "waiter-"+strconv.Itoa(i), false)
	}
	r, err := holder.s.client.Get(ctx, holder.s.prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) != 3 {
		t.Fatalf("%d keys under the prefix, want the tenure and two marks", len(r.Kvs))
	}
	for _, kv := range r.Kvs {
		if kv.Lease == 0 {
			t.Fatalf("key %q has no etcd lease", kv.Key)
		}
	}
	// b closes without a word: its mark ends with its lease.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := holder.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	if err := a.s.StopWaiting(ctx, name, "waiter-0"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(markLife + 5*time.Second)
	for {
		r, err := holder.s.client.Get(ctx, holder.s.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if r.Count == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keys left under the prefix %s after the marks' life", r.Count, markLife)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestWatchLingersAndIsReused: Stop sends nothing; a Watch of a name that
// a stopped Watch of the Locker watched sends nothing either, and wakes
// at the next release.
func TestWatchLingersAndIsReused(t *testing.T) {
	t.Parallel()
	l, w := newLocker(t)
	ctx := t.Context()
	name := uniqueName("linger")
	first, err := l.Watch(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the watches' creation goes out
	l.settle()
	w.take()
	first.Stop()
	turn, err := l.s.WatchTurn(ctx, name, "waiter")
	if err != nil {
		t.Fatal(err)
	}
	defer turn.Stop()
	plain, err := l.Watch(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()
	if m, n := w.take(); n != 0 {
		t.Fatalf("Stop and two Watches of a lingering name sent %v, want nothing", m)
	}
	held, err := l.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	drain(plain.Changed())
	drain(turn.Changed())
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	wakeWithin(t, plain.Changed(), 5*time.Second, "a plain Watch on a lingering subscription")
	wakeWithin(t, turn.Changed(), 5*time.Second, "a turn Watch on a lingering subscription")
}

// TestLingeringIsBounded: past maxIdle lingering subscriptions the one
// idle longest ends, and a lingering one ends after the linger time; a
// Watch of its name then sets the watch up again.
func TestLingeringIsBounded(t *testing.T) {
	t.Parallel()
	l, w := newLocker(t)
	l.s.watches.SetLimits(500*time.Millisecond, 2, 2)
	ctx := t.Context()
	names := []string{uniqueName("bound"), uniqueName("bound"), uniqueName("bound")}
	for _, name := range names {
		x, err := l.Watch(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		x.Stop()
	}
	if n := l.s.watches.Lingering(); n != 2 {
		t.Fatalf("%d subscriptions linger, want 2", n)
	}
	if l.s.watches.Has(names[0]) {
		t.Fatal("the subscription idle longest still lingers")
	}
	deadline := time.Now().Add(10 * time.Second)
	for l.s.watches.Lingering() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := l.s.watches.Lingering(); n != 0 {
		t.Fatalf("%d subscriptions still linger after the linger time", n)
	}
	w.take()
	x, err := l.Watch(ctx, names[2])
	if err != nil {
		t.Fatal(err)
	}
	defer x.Stop()
	if m, _ := w.take(); w.count(m, "Range") != 1 {
		t.Fatalf("a Watch after its subscription ended sent %v, want one Range (the read)", m)
	}
}

// fakeFollow runs l's follow of name on channels of the test's, with a
// turn Watch for each of waiters, until the test ends. It returns the
// channel that stands for the name key's etcd watch, and the Watches.
// Every subscription l makes from then on follows these channels.
func fakeFollow(t *testing.T, l *Locker, name string, waiters ...string) (chan<- clientv3.WatchResponse, []*watch) {
	t.Helper()
	keys := make(chan clientv3.WatchResponse)
	l.s.watches.Lock()
	l.s.watches.run = func(ctx context.Context, cw clientv3.Watcher, sb *sub) {
		l.s.watches.Lock()
		sb.Ready()
		l.s.watches.Unlock()
		l.s.follow(ctx, cw, sb, 0, func() {}, [2]clientv3.WatchChan{keys, make(chan clientv3.WatchResponse)})
	}
	l.s.watches.Unlock()
	var ws []*watch
	for _, waiter := range waiters {
		w, err := l.s.watches.Watch(t.Context(), name, true, waiter)
		if err != nil {
			t.Fatalf("a turn Watch of %s: %v", waiter, err)
		}
		t.Cleanup(w.Stop)
		ws = append(ws, w)
	}
	return keys, ws
}

// TestTurnChoiceIsOneDecision: two Lockers that learn of one release at
// different times, with the marks changing in between, wake the same
// waiter: the one whose mark was first at the release's revision R, and
// not one whose mark went before R (a) or after (b stays the choice).
//
// The previous design chose from what each Locker's own watch of the
// marks had delivered so far, and its fix read the marks at R-1 only
// when those events had not reached R-1; a Locker whose mark events ran
// ahead of its key events judged the release by marks from after it.
// In that test (the same steps, with the deletion of b's mark delivered
// to the first Locker before the release, as clientv3 may deliver two
// watches' events out of order) the first Locker woke c and the second
// b: conformance's "the Locker with the newer mark was woken by a
// Release, which chose another Locker" (issue 37).
func TestTurnChoiceIsOneDecision(t *testing.T) {
	t.Parallel()
	ls, _ := turnLockers(t, 2)
	ctx := t.Context()
	c := ls[0].s.client
	name := uniqueName("one")
	marks, key := ls[0].s.marksPrefix(name), ls[0].s.key(name)
	put := func(k string) int64 {
		t.Helper()
		r, err := c.Put(ctx, k, "")
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	del := func(k string) int64 {
		t.Helper()
		r, err := c.Delete(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	keyA, keyB, keyC := marks+"waiter-a\xff01", marks+"waiter-b\xff01", marks+"waiter-c\xff01"
	put(keyA)
	put(keyB)
	put(keyC)
	del(keyA) // a stops waiting before the release
	put(key)
	r := del(key) // the release, at R
	release := clientv3.WatchResponse{Events: []*clientv3.Event{{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: r}}}}

	keys0, ws0 := fakeFollow(t, ls[0], name, "waiter-a", "waiter-b", "waiter-c")
	keys1, ws1 := fakeFollow(t, ls[1], name, "waiter-a", "waiter-b", "waiter-c")
	keys0 <- release // the first Locker learns of it at once
	wakeWithin(t, ws0[1].Changed(), 5*time.Second, "b's turn Watch on the first Locker (the first mark at the release)")
	del(keyB) // b takes its turn or gives up: after R
	put(marks + "waiter-a\xff02")
	keys1 <- release // the second Locker learns of the release later
	wakeWithin(t, ws1[1].Changed(), 5*time.Second, "b's turn Watch on the second Locker (the first mark at the release)")
	for i, ws := range [][]*watch{ws0, ws1} {
		quietFor(t, ws[0].Changed(), turnQuiet, fmt.Sprintf("a's turn Watch on Locker %d (its mark went before the release)", i))
		quietFor(t, ws[2].Changed(), 0, fmt.Sprintf("c's turn Watch on Locker %d (a newer mark)", i))
	}
}

// TestStopWaitingPassesTheTurn: when the waiter a release chose stops
// waiting while the name is free, its StopWaiting wakes the next mark's
// waiter at once (and no one else, not a plain Watch either), and, with
// no mark left, every turn Watch; a StopWaiting of a mark that is not
// first, or while the name is held, wakes no one. A Locker that forgot
// its mark passes the turn on too.
func TestStopWaitingPassesTheTurn(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	ls, _ := turnLockers(t, 4)
	holder, a, b, c := ls[0], ls[1], ls[2], ls[3]
	ctx := t.Context()
	name := uniqueName("pass")
	wA, wB, wC := turnWatch(t, a, name, "waiter-a"), turnWatch(t, b, name, "waiter-b"), turnWatch(t, c, name, "waiter-c")
	plain, err := holder.Watch(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()
	all := []driver.Watch{wA, wB, wC, plain}
	drainAll := func() {
		for _, w := range all {
			drain(w.Changed())
		}
	}
	held, err := holder.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, a, name, "owner-a", "waiter-a", false)
	wait(t, b, name, "owner-b", "waiter-b", false)
	wait(t, c, name, "owner-c", "waiter-c", false)
	wait(t, holder, name, "owner-d", "waiter-d", false)
	// While the name is held, giving up passes nothing on.
	drainAll()
	if err := holder.s.StopWaiting(ctx, name, "waiter-d"); err != nil {
		t.Fatal(err)
	}
	for i, w := range all {
		quietFor(t, w.Changed(), turnQuiet/time.Duration(len(all)), fmt.Sprintf("Watch %d at a StopWaiting while the name is held", i))
	}
	if err := holder.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	wakeWithin(t, wA.Changed(), 5*time.Second, "a's turn Watch (the oldest mark) at the Release")
	quietFor(t, wB.Changed(), turnQuiet, "b's turn Watch at the Release")
	drainAll()

	// c's mark is not first: its StopWaiting passes nothing on.
	if err := c.s.StopWaiting(ctx, name, "waiter-c"); err != nil {
		t.Fatal(err)
	}
	for i, w := range all {
		quietFor(t, w.Changed(), turnQuiet/time.Duration(len(all)), fmt.Sprintf("Watch %d at the StopWaiting of a mark behind the first", i))
	}
	// a, chosen, gives up: b is next.
	if err := a.s.StopWaiting(ctx, name, "waiter-a"); err != nil {
		t.Fatal(err)
	}
	wakeWithin(t, wB.Changed(), 5*time.Second, "b's turn Watch (the next mark) at a's StopWaiting")
	quietFor(t, wA.Changed(), turnQuiet, "a's turn Watch at its own StopWaiting")
	quietFor(t, wC.Changed(), 0, "c's turn Watch (no mark) at a's StopWaiting")
	quietFor(t, plain.Changed(), 0, "a plain Watch at a StopWaiting (no release)")
	// b gives up too, on a Locker that forgot its mark: no mark is
	// left, so every turn Watch wakes.
	b.s.marks.forget(markID{name, "waiter-b"})
	if err := b.s.StopWaiting(ctx, name, "waiter-b"); err != nil {
		t.Fatal(err)
	}
	for _, w := range []driver.Watch{wA, wB, wC} {
		wakeWithin(t, w.Changed(), 5*time.Second, "a turn Watch at the StopWaiting of the last mark")
	}
	quietFor(t, plain.Changed(), turnQuiet, "a plain Watch at a StopWaiting (no release)")
	if got := marksOf(t, a, name); len(got) != 0 {
		t.Fatalf("marks left: %v", got)
	}
}

// TestMarkLifeIsTheCalls: a mark's etcd lease is granted for the Mark's
// Life, rounded up to whole seconds and never below the shortest lease
// etcd grants; a waiter that asks again with another Life moves its mark
// onto a lease of that life in the same transaction, keeping its place.
func TestMarkLifeIsTheCalls(t *testing.T) {
	t.Parallel()
	ls, ws := turnLockers(t, 3)
	holder, a, b := ls[0], ls[1], ls[2]
	ctx := t.Context()
	name := uniqueName("life")
	if _, err := holder.Acquire(ctx, name, "holder", time.Minute); err != nil {
		t.Fatal(err)
	}
	waitFor := func(l *Locker, waiter string, life time.Duration) {
		t.Helper()
		got, err := l.s.AcquireOrWait(ctx, name, "owner-"+waiter, time.Minute, driver.Mark{Waiter: waiter, Life: life})
		if err != nil || got.Owner != "holder" {
			t.Fatalf("AcquireOrWait(%s, life %s) = %+v, %v; want the holder's tenure", waiter, life, got, err)
		}
	}
	granted := func(kv *mvccpb.KeyValue) int64 {
		t.Helper()
		r, err := holder.s.client.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		if err != nil {
			t.Fatal(err)
		}
		return r.GrantedTTL
	}
	shortest := int64(shortestTTL(t, testEndpoints) / time.Second)
	waitFor(a, "waiter-a", 4*time.Second)
	waitFor(b, "waiter-b", 6500*time.Millisecond)
	waitFor(holder, "waiter-c", 300*time.Millisecond)
	marks := marksOf(t, holder, name)
	if len(marks) != 3 {
		t.Fatalf("marks %v, want three", marks)
	}
	if g := granted(marks[2]); g != max(1, shortest) {
		t.Fatalf("a mark of life 300ms is on an etcd lease of %ds, want %ds", g, max(1, shortest))
	}
	if g := granted(marks[1]); g != 7 {
		t.Fatalf("a mark of life 6.5s is on an etcd lease of %ds, want 7s", g)
	}
	ws[1].take()
	waitFor(a, "waiter-a", 9*time.Second)
	if m, _ := ws[1].take(); ws[1].count(m, "Txn") != 1 {
		t.Fatalf("an AcquireOrWait with another life sent %v, want one Txn", m)
	}
	again := marksOf(t, holder, name)
	if len(again) < 2 || string(again[0].Key) != string(marks[0].Key) || again[0].CreateRevision != marks[0].CreateRevision {
		t.Fatalf("marks after a asked with another life: %v, want a's mark first as before (%v)", again, marks)
	}
	if g := granted(again[0]); g != 9 {
		t.Fatalf("a's mark after it asked with life 9s is on an etcd lease of %ds, want 9s", g)
	}
}

// TestReleaseNamesTheChoice: a Release with waiters in line names the
// waiter it chose in a put of the pass key, so the waiting Lockers read
// nothing: the chosen one's turn Watch wakes, the other's does not, and
// neither sends a Range; the releasing Locker sends the Release's Txn
// and the put. (A deletion that names nobody, as an expiry, is read:
// TestTurnWakesOnlyTheOldestMark, TestTurnChoiceIsOneDecision.)
func TestReleaseNamesTheChoice(t *testing.T) {
	t.Parallel()
	ls, wires, name, held, wA, wB := heldWithTwoTurnWatches(t, "named")
	holder, a, b := ls[0], ls[1], ls[2]
	ctx := t.Context()
	wait(t, a, name, "owner-a", "waiter-a", false)
	wait(t, b, name, "owner-b", "waiter-b", false)
	drain(wA.Changed())
	drain(wB.Changed())
	for _, w := range wires {
		w.take()
	}
	if err := holder.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	wakeWithin(t, wA.Changed(), 5*time.Second, "a's turn Watch (the oldest mark) at the Release")
	quietFor(t, wB.Changed(), turnQuiet, "b's turn Watch at the Release")
	for i, w := range wires[1:] {
		if m, _ := w.take(); w.count(m, "Range") != 0 {
			t.Fatalf("waiting Locker %d sent %v at a Release that named its choice, want no Range", i, m)
		}
	}
	if m, _ := wires[0].take(); wires[0].count(m, "Txn") != 1 || wires[0].count(m, "Put") != 1 {
		t.Fatalf("the releasing Locker sent %v, want one Txn and one Put", m)
	}
	// The put is on the chosen mark's etcd lease, so that it ends with
	// the mark and leaves nothing behind (a keys-only read of the mark
	// leaves the lease out on etcd 3.7).
	r, err := holder.s.client.Get(ctx, holder.s.passKey(name))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) != 1 || r.Kvs[0].Lease == 0 {
		t.Fatalf("the pass key a Release named its choice in is %v, want it on the mark's etcd lease", r.Kvs)
	}
}
