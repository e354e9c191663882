package etcdlease

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/etcdtest"
	"github.com/leasekit/lease/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

// wakeWithin waits for a value on c, failing t after d.
func wakeWithin(t testing.TB, c <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(d):
		t.Fatalf("the watch did not wake within %s of %s", d, what)
	}
}

// drain empties c.
func drain(c <-chan struct{}) {
	select {
	case <-c:
	default:
	}
}

// TestWatchWakesOnReleaseForceReleaseAndExpiry: a waiter wakes when the
// tenure it waits for is released, force-released, or expires (etcd
// deletes the key when the tenure's etcd lease runs out).
func TestWatchWakesOnReleaseForceReleaseAndExpiry(t *testing.T) {
	t.Parallel()
	l, _ := newLocker(t)
	ctx := t.Context()
	name := uniqueName("watch")
	w, err := l.Watch(ctx, name)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Stop()

	held, err := l.Acquire(ctx, name, "owner-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	drain(w.Changed())
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	wakeWithin(t, w.Changed(), 5*time.Second, "a Release")

	if _, err := l.Acquire(ctx, name, "owner-b", time.Minute); err != nil {
		t.Fatal(err)
	}
	drain(w.Changed())
	if _, err := l.ForceRelease(ctx, name); err != nil {
		t.Fatal(err)
	}
	wakeWithin(t, w.Changed(), 5*time.Second, "a ForceRelease")

	ttl := shortestTTL(t, testEndpoints)
	if _, err := l.Acquire(ctx, name, "owner-c", ttl); err != nil {
		t.Fatal(err)
	}
	drain(w.Changed())
	wakeWithin(t, w.Changed(), ttl+expiryLag+5*time.Second, "the tenure's expiry")
	if _, err := l.Inspect(ctx, name); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Inspect after the expiry woke the watch: %v, want ErrNotHeld", err)
	}
}

// TestWatchIgnoresRenewals: a holder renewing (a keep-alive, or a Renew
// that moves the key onto another etcd lease, keeping the tenure) does
// not wake the waiters; a new tenure after an unseen end would.
func TestWatchIgnoresRenewals(t *testing.T) {
	t.Parallel()
	l, _ := newLocker(t)
	ctx := t.Context()
	name := uniqueName("watch-renew")
	held, err := l.Acquire(ctx, name, "owner-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w, err := l.Watch(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	held, err = l.Renew(ctx, held, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	held, err = l.Renew(ctx, held, 2*time.Minute) // another TTL: a put on a new etcd lease
	if err != nil {
		t.Fatal(err)
	}
	// The Release's wake-up must be the first: it follows the renewals'
	// events on the same watch.
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	wakeWithin(t, w.Changed(), 5*time.Second, "a Release")
	select {
	case <-w.Changed():
		t.Fatal("the watch woke twice: once before the Release")
	default:
	}
}

// TestWatchStopLeavesNoGoroutine: Stop and the end of the Watch's context
// leave the name's subscription lingering, whose goroutine ends once it
// has lingered long enough (lingerTime; shortened here), and the watch
// stream's once no watch is left; Close ends them at once.
//
// It checks the goroutines of the whole process: it runs alone (not parallel).
func TestWatchStopLeavesNoGoroutine(t *testing.T) {
	testenv.Slow(t)
	l, _ := newLocker(t)
	l.s.watches.SetLimits(2*time.Second, maxLingering, maxLingering)
	ctx := t.Context()
	if _, err := l.Inspect(ctx, "warm-up"); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	w1, err := l.Watch(ctx, uniqueName("stop"))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	w2, err := l.Watch(wctx, uniqueName("ctx"))
	if err != nil {
		t.Fatal(err)
	}
	w3, err := l.Watch(ctx, uniqueName("same"))
	if err != nil {
		t.Fatal(err)
	}
	w1.Stop()
	w1.Stop()
	cancel()
	w3.Stop()
	// The end of w2's context reaches it in a goroutine of its own.
	for i := 0; i < 100 && l.s.watches.Lingering() < 3; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n := l.s.watches.Lingering(); n != 3 {
		t.Fatalf("%d subscriptions linger after their Watches stopped, want 3", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for goleak.Find(before) != nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("after Stop and the end of the context, and the linger time: %v", err)
	}
	_ = w2

	l2 := mustNew(t, l.s.client, WithPrefix(randomPrefix()))
	if _, err := l2.Watch(ctx, uniqueName("close")); err != nil {
		t.Fatal(err)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("after Close with a Watch under way: %v", err)
	}
	if _, err := l2.Watch(ctx, "after-close"); !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("Watch after Close: %v, want ErrClosed", err)
	}
}

// TestWatchSharesOneStream: the Watches of a Locker share one gRPC Watch
// stream.
func TestWatchSharesOneStream(t *testing.T) {
	t.Parallel()
	l, wire := newLocker(t)
	ctx := t.Context()
	for i := range 5 {
		w, err := l.Watch(ctx, uniqueName("share"))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		_ = i
	}
	wire.mu.Lock()
	n := wire.calls["stream:Watch"]
	wire.mu.Unlock()
	if n != 1 {
		t.Fatalf("5 Watches opened %d Watch streams, want 1", n)
	}
}

// followFrom runs s.follow on ch, as the watch of name's key (its pass
// key's watch never answers), until the test ends, and returns the channel of
// a Watch of name that it wakes.
func followFrom(t *testing.T, s *store, name string, ch clientv3.WatchChan) <-chan struct{} {
	t.Helper()
	s.watches.Lock()
	s.watches.run = func(ctx context.Context, cw clientv3.Watcher, sb *sub) {
		s.watches.Lock()
		sb.Ready()
		s.watches.Unlock()
		s.follow(ctx, cw, sb, 0, func() {}, [2]clientv3.WatchChan{ch, make(chan clientv3.WatchResponse)})
	}
	s.watches.Unlock()
	w, err := s.watches.Watch(t.Context(), name, false, "")
	if err != nil {
		t.Fatalf("a Watch of %q: %v", name, err)
	}
	t.Cleanup(w.Stop)
	return w.Changed()
}

// releaseWakes checks that, once a cancelled watch on name woke, a
// Release of name wakes it again, whenever the new watch is in place.
func releaseWakes(t *testing.T, l *Locker, name string, woke <-chan struct{}) {
	t.Helper()
	ctx := t.Context()
	wakeWithin(t, woke, 5*time.Second, "the end of the watch")
	held, err := l.Acquire(ctx, name, "owner-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	drain(woke)
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	wakeWithin(t, woke, 5*time.Second, "a Release after the watch was set up again")
}

// TestWatchEndedIsSetUpAgain: when the etcd watch ends with the Watch
// still live, the Watch wakes, and watches again from a fresh revision.
func TestWatchEndedIsSetUpAgain(t *testing.T) {
	t.Parallel()
	l, _ := newLocker(t)
	name := uniqueName("ended")
	ch := make(chan clientv3.WatchResponse)
	woke := followFrom(t, l.s, name, ch)
	close(ch)
	releaseWakes(t, l, name, woke)
}

// TestWatchCompactedIsSetUpAgain: a watch whose revision was compacted
// (etcd cancels it) wakes and is set up again. Only on the embedded
// server: it compacts the server's history.
//
// It compacts the shared server, which would end other tests' watches:
// it runs alone (not parallel).
func TestWatchCompactedIsSetUpAgain(t *testing.T) {
	if etcdtest.External() != nil {
		t.Skip("compacts the server's history: only on the embedded server")
	}
	l, _ := newLocker(t)
	ctx := t.Context()
	name := uniqueName("compacted")
	for range 3 {
		if _, err := l.s.client.Put(ctx, l.s.prefix+"filler", "x"); err != nil {
			t.Fatal(err)
		}
	}
	r, err := l.s.client.Get(ctx, l.s.prefix+"filler")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.s.client.Compact(ctx, r.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	cw := clientv3.NewWatcher(l.s.client)
	defer cw.Close()
	ch := cw.Watch(clientv3.WithRequireLeader(ctx), l.s.key(name), clientv3.WithRev(r.Header.Revision-1))
	woke := followFrom(t, l.s, name, ch)
	releaseWakes(t, l, name, woke)
}

// handoff records, in order, what a waiter's Run does and sees.
type handoff struct {
	*Locker
	mu     sync.Mutex
	events []string
	busy   chan struct{}
	once   sync.Once
}

func (h *handoff) add(e string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
}

func (h *handoff) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	return h.attempt(func() (lease.Lease, error) { return h.Locker.Acquire(ctx, name, owner, ttl) })
}

// attempt records an attempt to acquire, and a busy answer.
func (h *handoff) attempt(acquire func() (lease.Lease, error)) (lease.Lease, error) {
	h.add("acquire")
	ls, err := acquire()
	if errors.Is(err, lease.ErrHeld) {
		h.add("busy")
		h.once.Do(func() { close(h.busy) })
	}
	return ls, err
}

// Watch wraps the Locker's Watch to record its wake-ups.
func (h *handoff) Watch(ctx context.Context, name string) (driver.Watch, error) {
	inner, err := h.Locker.Watch(ctx, name)
	if err != nil {
		return nil, err
	}
	return h.logged(inner), nil
}

// logged wraps inner to record its wake-ups.
func (h *handoff) logged(inner driver.Watch) driver.Watch {
	w := &loggedWatch{inner: inner, c: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-inner.Changed():
				h.add("woken")
				select {
				case w.c <- struct{}{}:
				default:
				}
			}
		}
	}()
	return w
}

type loggedWatch struct {
	inner driver.Watch
	c     chan struct{}
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

func (w *loggedWatch) Changed() <-chan struct{} { return w.c }

func (w *loggedWatch) Stop() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	w.inner.Stop()
}

// TestRunWaitingHandsOverOnRelease: lease.Run with WithWait on etcd gets
// a busy name after its holder releases it because the store woke it:
// after the Release, the waiter's next Acquire (through the wrapper: Run's
// waiting goes through Acquire) is the one that wins, and it comes well
// before its retry (every 2s for a minute's ttl) or the holder's expiry
// (a minute away).
func TestRunWaitingHandsOverOnRelease(t *testing.T) {
	t.Parallel()
	l, _ := newLocker(t)
	h := &handoff{Locker: l, busy: make(chan struct{})}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	name := uniqueName("handoff")
	held, err := l.Acquire(ctx, name, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() {
		ran <- lease.Run(ctx, h, name, time.Minute, func(context.Context) error {
			h.add("entered")
			return nil
		}, lease.WithWait(time.Minute), lease.WithOwner("waiter"))
	}()
	select {
	case <-h.busy:
	case <-ctx.Done():
		t.Fatal("the waiter never found the name busy")
	}
	h.add("released")
	released := time.Now()
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if d := time.Since(released); d >= time.Second {
		t.Errorf("the waiter entered %s after the Release; woken by the store it enters at once, polling at its 2s retry", d)
	}
	h.mu.Lock()
	events := slices.Clone(h.events)
	h.mu.Unlock()
	after := events[slices.Index(events, "released")+1:]
	want := []string{"acquire", "entered"}
	if !slices.Equal(after, want) {
		t.Fatalf("after the Release the waiter did %v, want %v (all: %v)", after, want, events)
	}
}
