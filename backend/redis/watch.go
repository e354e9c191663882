package redislease

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/hub"
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
	// Watch of the same name soon after finds it in place. The hub drops
	// the subscriptions idle for longer, many in one UNSUBSCRIBE, at most
	// a quarter of watchLinger late.
	watchLinger = 30 * time.Second
	// maxLingering bounds the idle subscriptions: beyond it the oldest
	// idle ones go at once, down to seven eighths of it, in one
	// UNSUBSCRIBE.
	maxLingering = 1024
)

// subs is a Locker's pub/sub side: the transport of its subscription
// hub (internal/hub), which keeps one subscription per channel watched
// (with the Watches on it) and per channel watched lately (idle, kept for
// watchLinger). They are all on one PubSub connection, read by one
// goroutine; both live from the first Watch until Close.
//
// Every command on the PubSub is written under the hub's lock, so the
// confirmations the goroutine reads come in the order of the commands.
type subs struct {
	hub.Hub[subState]
	client redis.UniversalClient
	// Under the hub's lock:
	ps   *redis.PubSub // nil: not started, or being opened again
	life context.Context
	end  context.CancelFunc
	done chan struct{} // closed when the goroutine returns; nil before it starts
}

// subState is the Redis side of the subscription to one channel.
type subState struct {
	// unsubs counts the UNSUBSCRIBEs sent on this connection whose
	// confirmation has not come back: until then a subscribe
	// confirmation is the answer to an earlier SUBSCRIBE.
	unsubs int
}

type sub = hub.Sub[subState]

// init makes h the transport of its hub, for client.
func (h *subs) init(client redis.UniversalClient) {
	h.client = client
	h.Init(h, hub.Limits{Linger: watchLinger, MaxIdle: maxLingering, TrimTo: maxLingering * 7 / 8, Setup: watchSetup,
		SetupFailed: func(ch string) error {
			return fmt.Errorf("redis did not confirm the subscription to %s within %s", ch, watchSetup)
		}})
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
	w, err := s.subs.Watch(ctx, s.channel(name), turn, waiter)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Subscribe implements hub.Transport: it sends SUBSCRIBE for sb's
// channel, starting the connection and its goroutine at the first one.
// The confirmation makes sb Ready (see receive).
func (h *subs) Subscribe(sb *sub) {
	if h.done == nil {
		h.life, h.end = context.WithCancel(context.Background())
		h.ps = h.client.Subscribe(h.life)
		h.done = make(chan struct{})
		go h.loop()
	}
	if h.ps == nil {
		return // the next connection subscribes to it
	}
	ctx, cancel := context.WithTimeout(h.life, pingEvery)
	defer cancel()
	if err := h.ps.Subscribe(ctx, sb.Key); err != nil {
		// go-redis may have moved to a new connection on its own,
		// leaving the confirmations of this one unaccounted for: open
		// another, subscribed to every channel, this one too.
		h.droppedLocked(h.ps)
	}
}

// Unsubscribe implements hub.Transport: it takes the idle subscriptions
// subs off the connection with one UNSUBSCRIBE; each goes from the hub
// when Redis confirms (see receive).
func (h *subs) Unsubscribe(subs []*sub) {
	if h.ps == nil {
		for _, sb := range subs {
			sb.Forget() // the next connection subscribes to none of them
		}
		return
	}
	chans := make([]string, len(subs))
	for i, sb := range subs {
		chans[i] = sb.Key
		sb.State.unsubs++
	}
	ctx, cancel := context.WithTimeout(h.life, pingEvery)
	defer cancel()
	if err := h.ps.Unsubscribe(ctx, chans...); err != nil {
		// Subscribe every channel with a Watch on a new connection: this
		// one goes with its watchless subscriptions.
		h.droppedLocked(h.ps)
	}
}

// loop reads the pub/sub connection until the Locker closes: it wakes the
// Watches of each channel a message comes on, confirms subscriptions,
// pings a silent connection, and opens a new connection when one drops.
func (h *subs) loop() {
	defer close(h.done)
	defer func() {
		h.Lock()
		if h.ps != nil {
			_ = h.ps.Close()
			h.ps = nil
		}
		h.Unlock()
	}()
	var (
		pinged  bool
		backoff time.Duration
	)
	for {
		h.Lock()
		ps := h.ps
		h.Unlock()
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
				}
				continue
			}
			pinged = false
			h.dropped(ps)
			continue
		}
		pinged, backoff = false, 0
		h.receive(msg)
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
	h.Lock()
	defer h.Unlock()
	h.droppedLocked(ps)
}

// droppedLocked is dropped with the hub's lock held.
func (h *subs) droppedLocked(ps *redis.PubSub) {
	if h.ps != ps {
		return
	}
	_ = ps.Close()
	h.ps = nil
	h.Lost()
	h.Each(func(sb *sub) { sb.State.unsubs = 0 })
}

// reopen opens a new pub/sub connection subscribed to every channel of
// the hub. Its confirmations wake the Watches (see receive).
func (h *subs) reopen() {
	h.Lock()
	defer h.Unlock()
	if h.Closed() || h.ps != nil {
		return
	}
	var chans []string
	h.Each(func(sb *sub) { chans = append(chans, sb.Key) })
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
	h.Lock()
	defer h.Unlock()
	switch m := msg.(type) {
	case *redis.Message:
		if sb := h.Get(m.Channel); sb != nil {
			wake(sb, m.Payload)
		}
	case *redis.Subscription:
		sb := h.Get(m.Channel)
		if sb == nil {
			return
		}
		switch m.Kind {
		case "subscribe":
			// Unless it answers a SUBSCRIBE sent before an UNSUBSCRIBE
			// still under way, it is in place (again, on a new
			// connection: Ready wakes its Watches then).
			if sb.State.unsubs == 0 {
				sb.Ready()
			}
		case "unsubscribe":
			if sb.State.unsubs > 0 {
				sb.State.unsubs--
			}
			if sb.State.unsubs == 0 {
				sb.Forget()
			}
		}
	}
}

// close wakes the Watches and ends the goroutine and the pub/sub
// connection, if they started.
func (h *subs) close() {
	h.Close()
	h.Lock()
	done, ps := h.done, h.ps
	h.Unlock()
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
