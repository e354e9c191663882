// Package hub keeps, for every store that notifies (etcd, Redis,
// PostgreSQL), this invariant: every Watch of a Locker belongs to exactly
// one subscription, its key's, and a subscription is in the Locker's
// registry exactly while its transport may hold it on the connection; a
// Watch returns only once its subscription is in place (Ready), and from
// then until it stops every event that may have freed the name wakes it,
// except, for a turn Watch, one that chose another waiter: an event that
// names a chosen waiter wakes that waiter's turn Watches and every plain
// Watch; one that names nobody, a lost connection, a subscription put in
// place again after a loss, and Close wake every Watch. A subscription
// whose last Watch stopped lingers (Limits.Linger; at most
// Limits.MaxIdle of them, the one idle longest going first), so that the
// next Watch of its key costs nothing; then the transport takes it off
// its connection (Transport.Unsubscribe), and a Watch that comes before
// the transport is done (Sub.Forget) revives it (Transport.Subscribe).
// Stop is safe to call more than once, and the end of the Watch's
// context stops it too.
//
// The hub is the part that was the same in the three stores: the
// registry (key -> subscription -> Watches, plain and turn by waiter),
// joining and leaving, lingering and its bound, the waking rules, and
// Close. A store keeps only its transport: how to put a subscription on
// its connection and take it off, how to read events and how to
// reconnect (see Transport).
//
// Locking. A Hub has one mutex (Lock, Unlock), which guards the registry,
// every Sub and its State. The methods of Sub, and Lost, Get, Each and
// Closed, expect the caller to hold it; Transport's methods are called
// with it held and must not wait long. Watch, Close, SetLimits, Has and
// Lingering take it themselves.
package hub

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// Transport is a store's side of a Hub: its connection. Both methods are
// called with the hub's lock held, and must not wait long.
type Transport[T any] interface {
	// Subscribe starts putting s on the connection: s is new, or was
	// going (Unsubscribe was called, Forget not yet) and a Watch revived
	// it. The transport calls s.Ready once it is in place, or s.Fail.
	Subscribe(s *Sub[T])
	// Unsubscribe starts taking subs off the connection: they have no
	// Watch, and lingered long enough or beyond the bound. The transport
	// calls Forget for each once it is done (at once, if it may).
	Unsubscribe(subs []*Sub[T])
}

// Limits bound a Hub's lingering subscriptions and its Watches' setup.
type Limits struct {
	// Linger is how long a subscription stays after its last Watch
	// stopped (0: not at all). Idle subscriptions are looked at together,
	// at most every quarter of Linger, so one may stay up to a quarter
	// longer.
	Linger time.Duration
	// MaxIdle bounds the lingering subscriptions: past it, the ones idle
	// longest go, down to TrimTo (at most MaxIdle).
	MaxIdle, TrimTo int
	// Setup bounds how long Watch waits for its subscription to be in
	// place.
	Setup time.Duration
	// SetupFailed is Watch's error when Setup passed (key is the
	// subscription's).
	SetupFailed func(key string) error
}

// Hub is a Locker's registry of subscriptions (see the package
// documentation). Its zero value is unusable: call Init.
type Hub[T any] struct {
	mu     sync.Mutex
	t      Transport[T]
	lim    Limits
	subs   map[string]*Sub[T]
	idle   list.List // *Sub[T] without a Watch, not going; idle longest first
	closed bool
	// timer looks at the idle subscriptions at armed (zero: not armed),
	// never before nextSweep.
	timer            *time.Timer
	armed, nextSweep time.Time
}

// Sub is the subscription to one key. Its fields and methods are under
// the hub's lock.
type Sub[T any] struct {
	// Key names the subscription in the registry: the transport's name
	// for it (a name, a channel).
	Key string
	// State is the transport's.
	State T

	h       *Hub[T]
	watches map[*Watch[T]]struct{}
	idle    *list.Element // non-nil while lingering
	since   time.Time     // when it became idle
	going   bool          // Unsubscribe was called, Forget not yet
	gone    bool          // out of the registry
	ready   chan struct{} // closed while in place
	open    bool          // ready is not closed
	lost    bool          // in place before a loss: its next Ready wakes
	err     error         // why it failed (Fail)
}

// Watch is one Watch of a Hub: plain, or a turn Watch of a waiter. It
// implements driver.Watch.
type Watch[T any] struct {
	driver.Signal
	sub       *Sub[T]
	turn      bool
	waiter    string
	once      sync.Once
	stopAfter func() bool
}

var _ driver.Watch = (*Watch[struct{}])(nil)

// Init makes h ready for use with transport t.
func (h *Hub[T]) Init(t Transport[T], lim Limits) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.t, h.lim = t, lim
	h.subs = map[string]*Sub[T]{}
}

// SetLimits changes how long subscriptions linger (linger) and how many
// may (maxIdle, trimTo as Limits), for tests.
func (h *Hub[T]) SetLimits(linger time.Duration, maxIdle, trimTo int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lim.Linger, h.lim.MaxIdle, h.lim.TrimTo = linger, maxIdle, trimTo
}

// Lock locks the hub.
func (h *Hub[T]) Lock() { h.mu.Lock() }

// Unlock unlocks the hub.
func (h *Hub[T]) Unlock() { h.mu.Unlock() }

// Watch starts a Watch of key, a turn Watch of waiter when turn, and
// returns once its subscription is in place; ctx bounds that and then
// the Watch's life. It fails with lease.ErrClosed after Close, with
// ctx's error, with Limits.SetupFailed's after Limits.Setup, or with the
// error the transport's Fail gave.
func (h *Hub[T]) Watch(ctx context.Context, key string, turn bool, waiter string) (*Watch[T], error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, lease.ErrClosed
	}
	s := h.subs[key]
	subscribe := false
	switch {
	case s == nil:
		s = &Sub[T]{Key: key, h: h, watches: map[*Watch[T]]struct{}{}}
		s.arm()
		h.subs[key] = s
		subscribe = true
	case s.going:
		s.going, s.lost = false, false
		s.arm()
		subscribe = true
	case s.idle != nil:
		h.idle.Remove(s.idle)
		s.idle = nil
	}
	w := &Watch[T]{Signal: driver.NewSignal(), sub: s, turn: turn, waiter: waiter}
	s.watches[w] = struct{}{}
	if subscribe {
		h.t.Subscribe(s)
	}
	ready, setup, failed := s.ready, h.lim.Setup, h.lim.SetupFailed
	h.mu.Unlock()

	select {
	case <-ready:
	default:
		t := time.NewTimer(setup)
		defer t.Stop()
		select {
		case <-ready:
		case <-ctx.Done():
			w.Stop()
			return nil, ctx.Err()
		case <-t.C:
			w.Stop()
			if failed == nil {
				return nil, fmt.Errorf("the subscription to %s was not in place within %s", key, setup)
			}
			return nil, failed(key)
		}
	}
	h.mu.Lock()
	err := s.err
	h.mu.Unlock()
	if err != nil {
		w.Stop()
		return nil, err
	}
	w.stopAfter = context.AfterFunc(ctx, w.leave)
	return w, nil
}

// Stop implements driver.Watch: the Watch wakes no more. It sends
// nothing: its subscription lingers when it was the last Watch on it.
func (w *Watch[T]) Stop() {
	if w.stopAfter != nil {
		w.stopAfter()
	}
	w.leave()
}

// leave takes w off its subscription, once.
func (w *Watch[T]) leave() {
	w.once.Do(func() {
		s := w.sub
		h := s.h
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(s.watches, w)
		if len(s.watches) > 0 || s.gone || s.going || h.closed {
			return
		}
		s.since = time.Now()
		s.idle = h.idle.PushBack(s)
		var drop []*Sub[T]
		if h.idle.Len() > h.lim.MaxIdle {
			drop = h.popIdle(h.idle.Len()-min(max(h.lim.TrimTo, 0), h.lim.MaxIdle), time.Time{})
		}
		if h.lim.Linger <= 0 {
			drop = append(drop, h.popIdle(h.idle.Len(), time.Time{})...)
		}
		h.drop(drop)
		h.schedule()
	})
}

// popIdle takes n subscriptions off the idle list, those idle longest,
// and then, when due is not zero, every other one idle since due or
// before; it marks them going.
func (h *Hub[T]) popIdle(n int, due time.Time) []*Sub[T] {
	var out []*Sub[T]
	for e := h.idle.Front(); e != nil; e = h.idle.Front() {
		s := e.Value.(*Sub[T])
		if len(out) >= n && (due.IsZero() || s.since.After(due)) {
			break
		}
		h.idle.Remove(e)
		s.idle, s.going = nil, true
		out = append(out, s)
	}
	return out
}

// drop hands subs to the transport to take off its connection.
func (h *Hub[T]) drop(subs []*Sub[T]) {
	if len(subs) > 0 {
		h.t.Unsubscribe(subs)
	}
}

// schedule arms the timer for the subscription idle longest.
func (h *Hub[T]) schedule() {
	f := h.idle.Front()
	if f == nil || h.closed {
		return
	}
	at := f.Value.(*Sub[T]).since.Add(h.lim.Linger)
	if at.Before(h.nextSweep) {
		at = h.nextSweep
	}
	if !h.armed.IsZero() && !at.Before(h.armed) {
		return
	}
	h.armed = at
	if h.timer == nil {
		h.timer = time.AfterFunc(time.Until(at), h.sweep)
	} else {
		h.timer.Reset(time.Until(at))
	}
}

// sweep hands the subscriptions idle for Linger to the transport, all
// at once.
func (h *Hub[T]) sweep() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed = time.Time{}
	if h.closed {
		return
	}
	now := time.Now()
	h.nextSweep = now.Add(h.lim.Linger / 4)
	h.drop(h.popIdle(0, now.Add(-h.lim.Linger)))
	h.schedule()
}

// Lingering is how many subscriptions have no Watch and are not going.
func (h *Hub[T]) Lingering() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.idle.Len()
}

// Has reports whether key has a subscription in the registry.
func (h *Hub[T]) Has(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.subs[key] != nil
}

// Close wakes every Watch and ends the hub: Watch fails with
// lease.ErrClosed from then on. The transport ends its connection
// itself.
func (h *Hub[T]) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.timer != nil {
		h.timer.Stop()
	}
	for _, s := range h.subs {
		s.Wake(true, true, "")
	}
}

// Closed reports whether Close was called. The caller holds the lock.
func (h *Hub[T]) Closed() bool { return h.closed }

// Get returns key's subscription, or nil. The caller holds the lock.
func (h *Hub[T]) Get(key string) *Sub[T] { return h.subs[key] }

// Each calls f for every subscription in the registry. The caller holds
// the lock; f must not change the registry.
func (h *Hub[T]) Each(f func(*Sub[T])) {
	for _, s := range h.subs {
		f(s)
	}
}

// Lost is the loss of the transport's connection, with everything on
// it: every Watch wakes (an event may have gone unheard); the
// subscriptions without a Watch leave the registry; the others are no
// longer in place, and their next Ready wakes their Watches again. The
// caller holds the lock.
func (h *Hub[T]) Lost() {
	for _, s := range h.subs {
		if len(s.watches) == 0 {
			h.remove(s)
			continue
		}
		s.Wake(true, true, "")
		if !s.open {
			s.lost = true
			s.arm()
		}
	}
}

// remove takes s out of the registry.
func (h *Hub[T]) remove(s *Sub[T]) {
	if s.idle != nil {
		h.idle.Remove(s.idle)
		s.idle = nil
	}
	if h.subs[s.Key] == s {
		delete(h.subs, s.Key)
	}
	s.gone, s.going = true, false
}

// arm makes s not in place: a Watch waits for Ready.
func (s *Sub[T]) arm() {
	if !s.open {
		s.ready, s.open = make(chan struct{}), true
	}
}

// Ready says s is in place on the connection: the Watches waiting for it
// return. When it was in place before the connection was lost, every
// Watch on it wakes, since an event may have gone unheard meanwhile.
func (s *Sub[T]) Ready() {
	if s.lost {
		s.lost = false
		s.Wake(true, true, "")
	}
	if s.open {
		close(s.ready)
		s.open = false
	}
}

// Fail says s could not be put in place, for err: it leaves the
// registry, and the Watches waiting for it fail with err.
func (s *Sub[T]) Fail(err error) {
	s.h.remove(s)
	s.err = err
	if s.open {
		close(s.ready)
		s.open = false
	}
}

// Going reports whether s was handed to Unsubscribe and no Watch revived
// it since.
func (s *Sub[T]) Going() bool { return s.going }

// Forget says the transport took s off its connection: s leaves the
// registry, unless a Watch revived it meanwhile (then it reports false,
// and the transport has had Subscribe for it).
func (s *Sub[T]) Forget() bool {
	if !s.going {
		return false
	}
	s.h.remove(s)
	return true
}

// HasTurn reports whether a turn Watch is on s.
func (s *Sub[T]) HasTurn() bool {
	for w := range s.watches {
		if w.turn {
			return true
		}
	}
	return false
}

// Wake wakes the Watches of s that an event concerns: the plain ones when
// plain; the turn ones when allTurns, else those of waiter (a waiter ""
// names nobody).
func (s *Sub[T]) Wake(plain, allTurns bool, waiter string) {
	for w := range s.watches {
		if w.turn && (allTurns || waiter != "" && w.waiter == waiter) || !w.turn && plain {
			w.Wake()
		}
	}
}
