package redislease

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

var (
	_ driver.Watcher = (*Locker)(nil)
	_ driver.Watcher = (*store)(nil)
)

// freeSuffix ends the name of the pub/sub channel on which release.lua
// and force_release.lua announce that a name's tenure ended:
//
//	<prefix>{<base64url(sha256(name))>}:free
//
// It has the hash tag of the name's keys, so it maps to their slot (the
// scripts derive it from the lease key, replacing leaseSuffix).
const freeSuffix = ":free"

// channel returns the pub/sub channel of name (see freeSuffix).
func (s *store) channel(name string) string { return s.keyBase(name) + freeSuffix }

const (
	// pingEvery is how long the pub/sub connection may stay silent before
	// the Locker pings it; a ping unanswered for as long again counts as
	// a dropped connection.
	pingEvery = 2 * time.Second
	// watchSetup bounds how long Watch waits for Redis to confirm a new
	// subscription, so that a waiter whose pub/sub connection is down
	// polls instead (lease.Run falls back to polling when Watch fails).
	watchSetup = 5 * time.Second
	// resubscribeBackoff bounds the wait between attempts to open the
	// pub/sub connection again.
	resubscribeBackoff = time.Second
	// watchLinger is how long a subscription stays after the last Watch
	// on it stopped, so that stopping a Watch costs no round trip and a
	// Watch of the same name soon after finds it in place. The loop drops
	// the subscriptions idle for longer, many in one UNSUBSCRIBE, at most
	// a quarter of watchLinger (and a ping interval) late.
	watchLinger = 30 * time.Second
	// maxLingering bounds the idle subscriptions: beyond it the oldest
	// idle ones go at once, down to seven eighths of it, in one
	// UNSUBSCRIBE.
	maxLingering = 1024
)

// subs is a Locker's pub/sub side: one PubSub connection shared by all its
// Watches, subscribed to the channel of each name watched (with the
// Watches on it) and of each name watched lately (an idle subscription,
// kept for watchLinger), and one goroutine that reads it. Both live from
// the first Watch until Close.
//
// Every subscription's state is changed only under mu, and every command
// on the PubSub is written under mu, so the confirmations the goroutine
// reads come in the order of the commands.
type subs struct {
	client redis.UniversalClient

	mu     sync.Mutex
	ps     *redis.PubSub // nil: not started, or being opened again
	chans  map[string]*sub
	idle   map[string]*sub // the subscriptions without a Watch, kept subscribed
	closed bool
	life   context.Context
	end    context.CancelFunc
	done   chan struct{} // closed when the goroutine returns; nil before it starts
	// linger is how long an idle subscription stays (watchLinger unless a
	// test set it before the first Watch); nextSweep is when the loop
	// next looks for idle subscriptions to drop.
	linger    time.Duration
	nextSweep time.Time
	// most bounds the idle subscriptions: maxLingering unless a test set
	// it before the first Watch.
	most int
}

// sub is the subscription to one channel.
type sub struct {
	watches map[*watch]struct{}
	// subscribed is set while the channel should be subscribed: the last
	// command sent for it on this connection was SUBSCRIBE, or the
	// connection is being opened again with it. It is clear once an
	// UNSUBSCRIBE was sent, until a Watch subscribes again.
	subscribed bool
	// confirmed is set once Redis confirmed the subscription; a later
	// confirmation is a subscription made again on a new connection.
	confirmed bool
	// ready is closed at the first confirmation.
	ready chan struct{}
	// unsubs counts the UNSUBSCRIBEs sent on this connection whose
	// confirmation has not come back: until then a subscribe
	// confirmation is the answer to an earlier SUBSCRIBE.
	unsubs int
	// idleSince is when the last Watch on it stopped (while in subs.idle).
	idleSince time.Time
}

// watch is one Watch on a name of a Redis Locker: a plain Watch, or a
// turn Watch of waiter (WatchTurn).
type watch struct {
	subs    *subs
	channel string
	turn    bool
	waiter  string
	driver.Signal
	stopAfter func() bool
	once      sync.Once
}

// Watch implements driver.Watcher: it subscribes to the name's channel
// (on the Locker's one pub/sub connection, only if the Locker has no
// subscription to it already) and returns once Redis has confirmed the
// subscription, so that every Release or ForceRelease that Redis runs
// after Watch returns publishes to a subscribed channel. The Watch's
// channel receives on each such message; when the pub/sub connection
// drops, on the drop and again once the subscriptions are in place on a
// new connection, since a release in between was not heard. The expiry
// of a tenure publishes nothing (the Locker does not use keyspace
// notifications): lease.Run's waiting wakes at the holder's remaining
// time for it. A Ring client cannot watch (its pub/sub connection would
// reach one shard only): Watch reports errors.ErrUnsupported.
//
// Stop sends nothing: the subscription stays, idle, for watchLinger, and
// a Watch of the name meanwhile uses it at once (see subs).
func (s *store) Watch(ctx context.Context, name string) (driver.Watch, error) {
	return s.watch(ctx, name, false, "")
}

// canWatch reports whether the store's client can watch: every client
// but a Ring, whose pub/sub connection would reach one shard only. It is
// the one condition under which Watch and WatchTurn report
// errors.ErrUnsupported, and Can answers from it.
func (s *store) canWatch() bool {
	_, ring := s.client.(*redis.Ring)
	return !ring
}

// watch is Watch, and WatchTurn when turn is set.
func (s *store) watch(ctx context.Context, name string, turn bool, waiter string) (driver.Watch, error) {
	if !s.canWatch() {
		return nil, ringUnsupported()
	}
	h := &s.subs
	ch := s.channel(name)
	w := &watch{subs: h, channel: ch, turn: turn, waiter: waiter, Signal: driver.NewSignal()}

	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, lease.ErrClosed
	}
	if h.done == nil {
		h.client = s.client
		h.life, h.end = context.WithCancel(context.Background())
		h.chans = map[string]*sub{}
		h.idle = map[string]*sub{}
		if h.linger <= 0 {
			h.linger = watchLinger
		}
		if h.most <= 0 {
			h.most = maxLingering
		}
		h.ps = s.client.Subscribe(h.life)
		h.done = make(chan struct{})
		go h.loop()
	}
	e := h.chans[ch]
	if e == nil {
		e = &sub{watches: map[*watch]struct{}{}}
		h.chans[ch] = e
	}
	// A subscription in place (or asked for) is used as it is, idle or
	// not; a new one, or one whose UNSUBSCRIBE is under way, is asked for
	// (again), and Watch waits for this confirmation.
	delete(h.idle, ch)
	e.watches[w] = struct{}{}
	if !e.subscribed {
		e.subscribed = true
		e.confirmed = false
		e.ready = make(chan struct{})
		if h.ps != nil {
			if err := h.ps.Subscribe(ctx, ch); err != nil {
				// go-redis may have moved to a new connection on its own,
				// leaving the confirmations of this one unaccounted for:
				// open another, subscribed to every channel, this one too.
				h.droppedLocked(h.ps)
			}
		}
	}
	ready := e.ready
	h.mu.Unlock()

	t := time.NewTimer(watchSetup)
	defer t.Stop()
	select {
	case <-ready:
	case <-ctx.Done():
		w.Stop()
		return nil, ctx.Err()
	case <-t.C:
		w.Stop()
		return nil, fmt.Errorf("redis did not confirm the subscription to %s within %s", ch, watchSetup)
	}
	w.stopAfter = context.AfterFunc(ctx, w.unsubscribe)
	return w, nil
}

// loop reads the pub/sub connection until the Locker closes: it wakes the
// Watches of each channel a message comes on, confirms subscriptions,
// pings a silent connection, and opens a new connection when one drops.
func (h *subs) loop() {
	defer close(h.done)
	defer func() {
		h.mu.Lock()
		if h.ps != nil {
			_ = h.ps.Close()
			h.ps = nil
		}
		h.mu.Unlock()
	}()
	var (
		pinged  bool
		backoff time.Duration
	)
	for {
		h.mu.Lock()
		ps := h.ps
		h.mu.Unlock()
		if ps == nil {
			if !h.sleep(backoff) {
				return
			}
			backoff = min(max(2*backoff, 50*time.Millisecond), resubscribeBackoff)
			h.reopen()
			continue
		}
		msg, err := ps.ReceiveTimeout(h.life, pingEvery)
		if h.life.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				pinged = true
				pctx, cancel := context.WithTimeout(h.life, pingEvery)
				err := ps.Ping(pctx)
				cancel()
				if err != nil {
					h.dropped(ps)
				} else {
					h.sweep()
				}
				continue
			}
			pinged = false
			h.dropped(ps)
			continue
		}
		pinged, backoff = false, 0
		h.receive(msg)
		h.sweep()
	}
}

// sleep waits d, or until the Locker closes (false).
func (h *subs) sleep(d time.Duration) bool {
	if d <= 0 {
		return h.life.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-h.life.Done():
		return false
	case <-t.C:
		return true
	}
}

// dropped gives up the connection of ps: it wakes every Watch (a release
// may have gone unheard) and leaves the loop to open another. Any error
// of a PubSub call leads here: go-redis reconnects a PubSub on its own
// after some errors, and the counts of unsubs would then no longer match
// the connection's confirmations.
func (h *subs) dropped(ps *redis.PubSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.droppedLocked(ps)
}

// droppedLocked is dropped with h.mu held.
func (h *subs) droppedLocked(ps *redis.PubSub) {
	if h.ps != ps {
		return
	}
	_ = ps.Close()
	h.ps = nil
	clear(h.idle)
	for ch, e := range h.chans {
		if len(e.watches) == 0 {
			delete(h.chans, ch)
			continue
		}
		e.unsubs = 0
		e.subscribed = true
		for w := range e.watches {
			w.Wake()
		}
	}
}

// reopen opens a new pub/sub connection subscribed to every channel with
// a Watch. Its confirmations wake the Watches (see receive).
func (h *subs) reopen() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.ps != nil {
		return
	}
	chans := make([]string, 0, len(h.chans))
	for ch := range h.chans {
		chans = append(chans, ch)
	}
	ctx, cancel := context.WithTimeout(h.life, pingEvery)
	defer cancel()
	ps := h.client.Subscribe(ctx)
	if len(chans) > 0 {
		if err := ps.Subscribe(ctx, chans...); err != nil {
			_ = ps.Close()
			return
		}
	}
	h.ps = ps
}

// receive handles one message from the pub/sub connection.
func (h *subs) receive(msg any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch m := msg.(type) {
	case *redis.Message:
		if e := h.chans[m.Channel]; e != nil {
			for w := range e.watches {
				if w.wakes(m.Payload) {
					w.Wake()
				}
			}
		}
	case *redis.Subscription:
		e := h.chans[m.Channel]
		if e == nil {
			return
		}
		switch m.Kind {
		case "subscribe":
			switch {
			case e.unsubs > 0:
				// The answer to a SUBSCRIBE sent before an UNSUBSCRIBE
				// still under way.
			case !e.confirmed:
				e.confirmed = true
				close(e.ready)
			default:
				// Subscribed again on a new connection: a release may have
				// gone unheard meanwhile.
				for w := range e.watches {
					w.Wake()
				}
			}
		case "unsubscribe":
			if e.unsubs > 0 {
				e.unsubs--
			}
			if e.unsubs == 0 && !e.subscribed {
				delete(h.chans, m.Channel)
			}
		}
	}
}

// close ends the goroutine and the pub/sub connection, if they started.
func (h *subs) close() {
	h.mu.Lock()
	h.closed = true
	done, ps := h.done, h.ps
	h.mu.Unlock()
	if done == nil {
		return
	}
	h.end()
	if ps != nil {
		// Ends the read the goroutine may be waiting on.
		_ = ps.Close()
	}
	<-done
}

// Stop implements driver.Watch: it takes the Watch off its channel. It
// sends nothing: when no other Watch is on the channel, the subscription
// stays, idle, for a later Watch of the name, until the loop drops it
// (see sweep).
func (w *watch) Stop() {
	if w.stopAfter != nil {
		w.stopAfter()
	}
	w.unsubscribe()
}

func (w *watch) unsubscribe() {
	w.once.Do(func() {
		h := w.subs
		h.mu.Lock()
		defer h.mu.Unlock()
		e := h.chans[w.channel]
		if e == nil {
			return
		}
		delete(e.watches, w)
		if len(e.watches) > 0 {
			return
		}
		if h.ps == nil || h.closed {
			// No connection to keep it on: the next one subscribes only
			// the channels with a Watch.
			delete(h.chans, w.channel)
			return
		}
		e.idleSince = time.Now()
		h.idle[w.channel] = e
		if len(h.idle) > h.most {
			h.dropIdleLocked(len(h.idle) - h.most*7/8)
		}
	})
}

// sweep drops the subscriptions idle for longer than h.linger, in one
// UNSUBSCRIBE. The loop calls it after each message and each ping; it
// looks at the idle subscriptions at most every quarter of h.linger.
func (h *subs) sweep() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.idle) == 0 || h.ps == nil || h.closed {
		return
	}
	now := time.Now()
	if now.Before(h.nextSweep) {
		return
	}
	h.nextSweep = now.Add(h.linger / 4)
	var old []string
	for ch, e := range h.idle {
		if now.Sub(e.idleSince) >= h.linger {
			old = append(old, ch)
		}
	}
	h.unsubscribeLocked(old)
}

// dropIdleLocked drops the n idle subscriptions that have been idle
// longest, in one UNSUBSCRIBE. h.mu must be held.
func (h *subs) dropIdleLocked(n int) {
	chans := make([]string, 0, len(h.idle))
	for ch := range h.idle {
		chans = append(chans, ch)
	}
	slices.SortFunc(chans, func(a, b string) int { return h.idle[a].idleSince.Compare(h.idle[b].idleSince) })
	h.unsubscribeLocked(chans[:n])
}

// unsubscribeLocked takes the idle subscriptions to chans off the
// connection with one UNSUBSCRIBE; each entry goes when Redis confirms.
// h.mu must be held, and h.ps set.
func (h *subs) unsubscribeLocked(chans []string) {
	if len(chans) == 0 {
		return
	}
	for _, ch := range chans {
		e := h.idle[ch]
		delete(h.idle, ch)
		e.subscribed = false
		e.unsubs++
	}
	ctx, cancel := context.WithTimeout(h.life, pingEvery)
	defer cancel()
	if err := h.ps.Unsubscribe(ctx, chans...); err != nil {
		// Subscribe every channel with a Watch on a new connection: this
		// one goes with its watchless entries.
		h.droppedLocked(h.ps)
	}
}
