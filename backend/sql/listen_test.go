package sqllease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/sql/internal/pglisten"
	"github.com/leasekit/lease/driver"
)

// testListener is the Listener of backend/sql/postgres's Open, with an
// application_name of its own so that a test can find its connections.
type testListener struct {
	l   *pglisten.Listener
	app string
	// sent counts the statements sent on its connections (LISTEN, the
	// watch locks and unlocks, pings).
	sent atomic.Int64
}

func newTestListener(t testing.TB, raw string) *testListener {
	t.Helper()
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		t.Fatalf("bad test URL: %v", err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	app := "lease-listen-" + hex.EncodeToString(b)
	cfg.RuntimeParams["application_name"] = app
	return &testListener{l: pglisten.New(cfg), app: app}
}

func (l *testListener) Connect(ctx context.Context) (ListenConn, error) {
	c, err := l.l.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return countingListenConn{c, &l.sent}, nil
}

// countingListenConn counts the statements sent on a listening
// connection.
type countingListenConn struct {
	ListenConn
	sent *atomic.Int64
}

func (c countingListenConn) Exec(ctx context.Context, sql string) error {
	c.sent.Add(1)
	return c.ListenConn.Exec(ctx, sql)
}

func (c countingListenConn) QueryBool(ctx context.Context, sql string) (bool, error) {
	c.sent.Add(1)
	return c.ListenConn.QueryBool(ctx, sql)
}

// listening counts the listener's connections on the server.
func (s *testStore) listening(t *testing.T) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, s.listener.app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// watchLocks counts the advisory locks (watch locks) held by the
// listener's connections.
func (s *testStore) watchLocks(t *testing.T) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND a.application_name = $1`, s.listener.app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitWake fails t unless w wakes within d.
func waitWake(t *testing.T, w driver.Watch, d time.Duration, after string) {
	t.Helper()
	select {
	case <-w.Changed():
	case <-time.After(d):
		t.Fatalf("the watch did not wake within %s of %s", d, after)
	}
}

// drain empties w's pending wake-up.
func drain(w driver.Watch) {
	select {
	case <-w.Changed():
	default:
	}
}

// TestReleaseNotifiesOnlyWatchedNames: a release sends NOTIFY only when a
// Locker watches the name (its listening connection holds the name's
// watch lock), so releases nobody waits for do not serialize their commits.
func TestReleaseNotifiesOnlyWatchedNames(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	l := s.newLocker(t)
	setLinger(l, 0, maxLingering) // watch locks go as their watches stop
	ctx := t.Context()
	// An eavesdropper on the channel, as a second process would be.
	if _, err := l.Inspect(ctx, "x"); !errors.Is(err, lease.ErrNotHeld) { // sets the Locker up
		t.Fatal(err)
	}
	ch, _ := channelFor(l.s.qualified)
	ear, err := s.listener.l.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ear.Close()
	if err := ear.Exec(ctx, "LISTEN "+quoteIdent(ch)); err != nil {
		t.Fatal(err)
	}
	heard := func(d time.Duration) (string, bool) {
		wctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		_, p, err := ear.WaitForNotification(wctx)
		return p, err == nil
	}

	held, err := l.Acquire(ctx, "unwatched", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	if p, ok := heard(300 * time.Millisecond); ok {
		t.Fatalf("a release of a name nobody watches sent NOTIFY %q", p)
	}

	w, err := l.Watch(ctx, "watched")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	held, err = l.Acquire(ctx, "watched", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	drain(w)
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	if p, ok := heard(5 * time.Second); !ok || p != hex.EncodeToString(key("watched")) {
		t.Fatalf("a release of a watched name: heard %q, %v; want its key", p, ok)
	}
	waitWake(t, w, 5*time.Second, "the release")

	// Force-release notifies too.
	if _, err := l.Acquire(ctx, "watched", "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	drain(w)
	if _, err := l.ForceRelease(ctx, "watched"); err != nil {
		t.Fatal(err)
	}
	waitWake(t, w, 5*time.Second, "the force-release")

	// Once the watch stops (and its watch lock has lingered), the lock goes
	// and releases are silent again.
	w.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for s.watchLocks(t) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the watch lock of a stopped watch is still held after 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	held, err = l.Acquire(ctx, "watched", "c", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, ok := heard(50 * time.Millisecond); !ok {
			break // drained what the force-release's NOTIFY left
		}
	}
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	if p, ok := heard(300 * time.Millisecond); ok {
		t.Fatalf("a release after the watch stopped sent NOTIFY %q", p)
	}
}

// TestWatchAcrossLockers: a release by another Locker (another process's)
// wakes the watch, and many watches of one name share one watch lock.
func TestWatchAcrossLockers(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	a, b := s.openLocker(t), s.openLocker(t)
	ctx := t.Context()
	var ws []driver.Watch
	for range 3 {
		w, err := a.Watch(ctx, "shared")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ws = append(ws, w)
	}
	if n := s.watchLocks(t); n != 1 {
		t.Fatalf("three watches of one name hold %d watch locks, want 1", n)
	}
	held, err := b.Acquire(ctx, "shared", "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		drain(w)
	}
	if err := b.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		waitWake(t, w, 5*time.Second, "another Locker's release")
	}
}

// TestWatchSurvivesADroppedConnection: when the listening connection is
// cut, every watch wakes at once (a release may have gone unheard), the
// Locker connects again, and the next release wakes the watch as before.
func TestWatchSurvivesADroppedConnection(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	l := s.newLocker(t)
	ctx := t.Context()
	w, err := l.Watch(ctx, "cut")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	held, err := l.Acquire(ctx, "cut", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	drain(w)
	if _, err := s.db.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, s.listener.app); err != nil {
		t.Fatal(err)
	}
	waitWake(t, w, 5*time.Second, "the listening connection was cut")
	// Connected again, with the watch lock back in place.
	deadline := time.Now().Add(10 * time.Second)
	for s.listening(t) != 1 || s.watchLocks(t) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("10s after the cut: %d listening connections and %d watch locks, want 1 and 1", s.listening(t), s.watchLocks(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
	drain(w)
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	waitWake(t, w, 5*time.Second, "a release after the reconnection")
}

// TestStoppedWatchesLeaveNothing: watches stopped or whose context ended
// give their watch locks back once they have lingered, and Close closes
// the listening connection.
func TestStoppedWatchesLeaveNothing(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	l := s.newLocker(t)
	setLinger(l, 200*time.Millisecond, maxLingering)
	cctx, cancel := context.WithCancel(t.Context())
	var ws []driver.Watch
	for i := range 20 {
		ctx := t.Context()
		if i%2 == 0 {
			ctx = cctx
		}
		w, err := l.Watch(ctx, "name-"+string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	if n := s.watchLocks(t); n != 20 {
		t.Fatalf("20 watched names hold %d watch locks", n)
	}
	cancel()
	for i, w := range ws {
		if i%2 == 1 {
			w.Stop()
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.watchLocks(t) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d watch locks left 5s after every watch ended", s.watchLocks(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.listening(t); n != 1 {
		t.Fatalf("%d listening connections, want 1 until Close", n)
	}
	l.Close()
	deadline = time.Now().Add(5 * time.Second)
	for s.listening(t) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the listening connection is still open 5s after Close")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := l.Watch(t.Context(), "after"); !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("Watch after Close: %v, want ErrClosed", err)
	}
}

// TestWithListenerNeedsPostgres: other dialects refuse a Listener, and a
// Locker without one cannot watch (lease.Run polls it).
func TestWithListenerNeedsPostgres(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	if _, err := New(s.db, WithListener(&testListener{})); !errors.Is(err, lease.ErrInvalid) || !contains(err, "PostgreSQL") {
		t.Fatalf("WithListener on SQLite: %v, want ErrInvalid naming PostgreSQL", err)
	}
	if _, err := New(s.db, WithListener(nil)); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("WithListener(nil): %v, want ErrInvalid", err)
	}
	l := s.newLocker(t)
	if _, err := l.Watch(t.Context(), "x"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Watch without a Listener: %v, want ErrUnsupported", err)
	}
}

// TestWatchWhoseContextEndsAsItIsReady: a watch whose context has ended
// by the time its name is ready may still be returned (the select picks
// either), and its context then ends it at once through
// context.AfterFunc, on another goroutine, while watch is still storing
// the function that unregisters it. That must not race with Stop's read
// of it (go test -race), and the watch ends either way.
func TestWatchWhoseContextEndsAsItIsReady(t *testing.T) {
	t.Parallel()
	s := postgresStore(t)
	l := s.openLocker(t)
	first, err := l.Watch(t.Context(), "ready")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop() // keeps the name's watch lock: later watches are ready at once
	returned := 0
	for range 20 {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		w, err := l.s.watch(ctx, "ready", "")
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("watch with an ended context: %v; want context.Canceled", err)
			}
			continue
		}
		returned++
		time.Sleep(time.Millisecond) // let the context's AfterFunc run first
		w.Stop()
	}
	t.Logf("%d of 20 watches were returned with their context ended", returned)
}
