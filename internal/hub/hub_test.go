package hub

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// fake is a Transport that records what the hub asks of it. With ready,
// Subscribe puts the subscription in place at once; with forget,
// Unsubscribe takes them off at once. The hub's lock guards it.
type fake struct {
	h             *Hub[int]
	ready, forget bool
	subscribed    []string
	unsubscribed  []string
	unsubs        chan struct{} // receives at each Unsubscribe
}

func (f *fake) Subscribe(s *Sub[int]) {
	f.subscribed = append(f.subscribed, s.Key)
	s.State++
	if f.ready {
		s.Ready()
	}
}

func (f *fake) Unsubscribe(subs []*Sub[int]) {
	for _, s := range subs {
		f.unsubscribed = append(f.unsubscribed, s.Key)
		if f.forget {
			s.Forget()
		}
	}
	select {
	case f.unsubs <- struct{}{}:
	default:
	}
}

// newHub is a Hub on a fake transport that is ready and forgets at once,
// with a minute's linger, at most maxIdle idle subscriptions (down to
// trimTo), and a setup bound of a second.
func newHub(t *testing.T, maxIdle, trimTo int) (*Hub[int], *fake) {
	t.Helper()
	f := &fake{ready: true, forget: true, unsubs: make(chan struct{}, 1)}
	h := &Hub[int]{}
	f.h = h
	h.Init(f, Limits{Linger: time.Minute, MaxIdle: maxIdle, TrimTo: trimTo, Setup: time.Second,
		SetupFailed: func(key string) error { return errors.New("setup of " + key) }})
	t.Cleanup(h.Close)
	return h, f
}

func mustWatch(t *testing.T, h *Hub[int], key string, turn bool, waiter string) *Watch[int] {
	t.Helper()
	w, err := h.Watch(t.Context(), key, turn, waiter)
	if err != nil {
		t.Fatalf("Watch(%s, %v, %q): %v", key, turn, waiter, err)
	}
	return w
}

func woken(w driver.Watch) bool {
	select {
	case <-w.Changed():
		return true
	default:
		return false
	}
}

// locked runs f with h locked.
func locked(h *Hub[int], f func()) {
	h.Lock()
	defer h.Unlock()
	f()
}

// TestWatchesShareOneSubscription: the Watches of a key share one
// subscription, subscribed once; another key has its own.
func TestWatchesShareOneSubscription(t *testing.T) {
	h, f := newHub(t, 8, 8)
	a := mustWatch(t, h, "k", false, "")
	b := mustWatch(t, h, "k", true, "w1")
	c := mustWatch(t, h, "other", false, "")
	defer a.Stop()
	defer b.Stop()
	defer c.Stop()
	locked(h, func() {
		if !slices.Equal(f.subscribed, []string{"k", "other"}) {
			t.Fatalf("subscribed %v, want [k other]", f.subscribed)
		}
		if a.sub != b.sub || a.sub == c.sub {
			t.Fatal("the Watches of one key are not on one subscription, or two keys share one")
		}
	})
}

// TestWakingRules: an event that names a waiter wakes its turn Watches
// and the plain ones; one that names nobody wakes every Watch; a turn
// event (no plain) wakes no plain Watch; one for plain Watches only wakes
// no turn Watch.
func TestWakingRules(t *testing.T) {
	h, _ := newHub(t, 8, 8)
	plain := mustWatch(t, h, "k", false, "")
	w1 := mustWatch(t, h, "k", true, "w1")
	w2 := mustWatch(t, h, "k", true, "w2")
	all := []*Watch[int]{plain, w1, w2}
	for _, c := range []struct {
		what           string
		plain, allTurn bool
		waiter         string
		want           []bool // plain, w1, w2
	}{
		{"a release that chose w1", true, false, "w1", []bool{true, true, false}},
		{"a release that chose nobody", true, true, "", []bool{true, true, true}},
		{"a turn passed to w2", false, false, "w2", []bool{false, false, true}},
		{"a message for plain Watches only", true, false, "", []bool{true, false, false}},
		{"a release that chose a waiter with no Watch here", true, false, "w3", []bool{true, false, false}},
	} {
		locked(h, func() { h.Get("k").Wake(c.plain, c.allTurn, c.waiter) })
		for i, w := range all {
			if got := woken(w); got != c.want[i] {
				t.Errorf("%s: Watch %d woken %v, want %v", c.what, i, got, c.want[i])
			}
		}
	}
	for _, w := range all {
		w.Stop()
	}
}

// TestStopTwiceAndContextEnd: Stop may be called twice; the end of the
// Watch's context stops it too; either way the subscription lingers,
// with no Unsubscribe.
func TestStopTwiceAndContextEnd(t *testing.T) {
	h, f := newHub(t, 8, 8)
	w := mustWatch(t, h, "k", false, "")
	w.Stop()
	w.Stop()
	ctx, cancel := context.WithCancel(t.Context())
	w2, err := h.Watch(ctx, "k2", true, "w")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for h.Lingering() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := h.Lingering(); n != 2 {
		t.Fatalf("%d subscriptions linger, want 2", n)
	}
	w2.Stop()
	locked(h, func() {
		if len(f.unsubscribed) != 0 {
			t.Fatalf("unsubscribed %v, want nothing (they linger)", f.unsubscribed)
		}
		h.Get("k").Wake(true, true, "")
	})
	if woken(w) {
		t.Fatal("a stopped Watch was woken")
	}
	// A Watch of a lingering key reuses it: no Subscribe.
	w3 := mustWatch(t, h, "k", false, "")
	defer w3.Stop()
	locked(h, func() {
		if !slices.Equal(f.subscribed, []string{"k", "k2"}) {
			t.Fatalf("subscribed %v, want [k k2]", f.subscribed)
		}
	})
	if n := h.Lingering(); n != 1 {
		t.Fatalf("%d subscriptions linger, want 1", n)
	}
}

// TestLingeringIsBounded: past MaxIdle idle subscriptions the ones idle
// longest go, down to TrimTo, in one Unsubscribe.
func TestLingeringIsBounded(t *testing.T) {
	h, f := newHub(t, 3, 1)
	for _, k := range []string{"a", "b", "c", "d"} {
		mustWatch(t, h, k, false, "").Stop()
	}
	locked(h, func() {
		if !slices.Equal(f.unsubscribed, []string{"a", "b", "c"}) {
			t.Fatalf("unsubscribed %v, want [a b c]", f.unsubscribed)
		}
	})
	if n := h.Lingering(); n != 1 || !h.Has("d") || h.Has("a") {
		t.Fatalf("%d linger (d there: %v, a there: %v), want d alone", n, h.Has("d"), h.Has("a"))
	}
}

// TestLingerEnds: a subscription idle for Linger is unsubscribed, and a
// Watch of its key afterwards subscribes again; with no linger, the last
// Watch's Stop unsubscribes at once.
func TestLingerEnds(t *testing.T) {
	h, f := newHub(t, 8, 8)
	h.SetLimits(20*time.Millisecond, 8, 8)
	mustWatch(t, h, "k", false, "").Stop()
	select {
	case <-f.unsubs:
	case <-time.After(5 * time.Second):
		t.Fatal("the lingering subscription was not unsubscribed within 5s")
	}
	if h.Has("k") {
		t.Fatal("the subscription is still in the registry")
	}
	mustWatch(t, h, "k", false, "").Stop()
	h.SetLimits(0, 8, 8)
	mustWatch(t, h, "now", false, "").Stop()
	locked(h, func() {
		if !slices.Equal(f.subscribed, []string{"k", "k", "now"}) || !slices.Contains(f.unsubscribed, "now") {
			t.Fatalf("subscribed %v, unsubscribed %v; want k twice and now, and now unsubscribed", f.subscribed, f.unsubscribed)
		}
	})
}

// TestRevivedWhileGoing: a Watch of a key whose subscription is going
// (Unsubscribe called, Forget not yet) revives it through Subscribe, and
// waits for Ready; the transport's Forget then leaves it.
func TestRevivedWhileGoing(t *testing.T) {
	h, f := newHub(t, 0, 0)
	locked(h, func() { f.forget = false })
	mustWatch(t, h, "k", false, "").Stop() // over the bound of 0: goes at once
	var s *Sub[int]
	locked(h, func() {
		s = h.Get("k")
		if s == nil || !s.Going() {
			t.Fatal("the subscription is not going")
		}
		f.ready = false
	})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		w, err := h.Watch(ctx, "k", false, "")
		if err == nil {
			defer w.Stop()
		}
		got <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		locked(h, func() { n = len(f.subscribed) })
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the revived subscription was not subscribed again")
		}
		time.Sleep(time.Millisecond)
	}
	locked(h, func() {
		if s.Going() || s.Forget() {
			t.Fatal("a revived subscription is still going, or Forget took it")
		}
		s.Ready()
	})
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if !h.Has("k") {
		t.Fatal("the revived subscription left the registry")
	}
}

// TestLostWakesAndWaits: a lost connection wakes every Watch, drops the
// subscriptions without one, and holds new Watches until the
// subscription is Ready again, which wakes the Watches once more.
func TestLostWakesAndWaits(t *testing.T) {
	h, f := newHub(t, 8, 8)
	plain := mustWatch(t, h, "k", false, "")
	turn := mustWatch(t, h, "k", true, "w")
	defer plain.Stop()
	defer turn.Stop()
	mustWatch(t, h, "idle", false, "").Stop()
	locked(h, func() {
		f.ready = false
		h.Lost()
	})
	if !woken(plain) || !woken(turn) {
		t.Fatal("a lost connection did not wake every Watch")
	}
	if h.Has("idle") {
		t.Fatal("a subscription without a Watch outlived the lost connection")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := h.Watch(ctx, "k", false, ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a Watch while the subscription is not in place: %v, want the context's deadline", err)
	}
	locked(h, func() { h.Get("k").Ready() })
	if !woken(plain) || !woken(turn) {
		t.Fatal("the subscription in place again did not wake every Watch")
	}
	w := mustWatch(t, h, "k", false, "")
	w.Stop()
}

// TestSetupFailures: a subscription the transport fails fails its
// waiting Watches with the transport's error, and leaves the registry;
// one never Ready fails them after Setup, with SetupFailed's error.
func TestSetupFailures(t *testing.T) {
	h, f := newHub(t, 8, 8)
	h.SetLimits(time.Minute, 8, 8)
	locked(h, func() { f.ready = false })
	boom := errors.New("boom")
	got := make(chan error, 1)
	go func() {
		_, err := h.Watch(t.Context(), "k", false, "")
		got <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !h.Has("k") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	locked(h, func() { h.Get("k").Fail(boom) })
	if err := <-got; !errors.Is(err, boom) {
		t.Fatalf("Watch of a failed subscription: %v, want boom", err)
	}
	if h.Has("k") {
		t.Fatal("a failed subscription stayed in the registry")
	}
	locked(h, func() { h.lim.Setup = 10 * time.Millisecond })
	if _, err := h.Watch(t.Context(), "slow", false, ""); err == nil || err.Error() != "setup of slow" {
		t.Fatalf("Watch never in place: %v, want SetupFailed's error", err)
	}
}

// TestCloseWakesAndEnds: Close wakes every Watch, and Watch fails with
// lease.ErrClosed afterwards; Stop after Close is harmless.
func TestCloseWakesAndEnds(t *testing.T) {
	h, _ := newHub(t, 8, 8)
	w := mustWatch(t, h, "k", true, "w")
	h.Close()
	if !woken(w) {
		t.Fatal("Close did not wake the Watch")
	}
	w.Stop()
	if _, err := h.Watch(t.Context(), "k", false, ""); !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("Watch after Close: %v, want ErrClosed", err)
	}
}
