package driver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/line"
)

// The line of waiters. A caller that waits for a name (lease.Run with
// WithWait or WithFairWait) passes a line.Wait to Acquire in the context.
// Over a store that keeps a line (a TurnWatcher), the Locker keeps its own
// waiters for the name in arrival order, and they are the near end of the
// store's line: the Locker has one mark there, one turn Watch, and only
// its first waiter (the head) asks the store; the others are answered
// "held" without a round trip until they are first. A release that chose
// the Locker wakes its head; a head that leaves having acquired puts the
// mark at the back when others of the Locker still wait (Keep), so that
// Lockers take turns; a head that gives up makes the next waiter the head
// at once, and the last waiter to leave takes the mark away (StopWaiting,
// which passes the turn on in the store). Everything here is a hint about
// whom to wake, except Mark.Fair, which the store enforces: safety (one
// holder, increasing tokens) is Acquire's and never depends on the line.

// lines is a Locker's waiting through a TurnWatcher.
type lines struct {
	once   sync.Once
	id     string
	noLine atomic.Bool // the store said it cannot watch (errors.ErrUnsupported)
	mu     sync.Mutex
	names  map[string]*nameLine
}

// nameLine is the Locker's line for one name.
type nameLine struct {
	waits  []*line.Wait    // head first
	busy   lease.HeldError // the head's last busy answer, for the others
	marked bool            // the store may hold this Locker's mark
	// The turn Watch, once set up: its wake-ups go to the head.
	watch  Watch
	cancel context.CancelFunc // ends the watch's context
	setup  bool               // a waiter is setting the watch up
	stop   chan struct{}      // closed when the line is dropped
	relay  sync.WaitGroup     // the goroutine that passes wake-ups to the head
}

// waiter returns the Locker's waiter ID: 16 random bytes in hex, drawn
// once.
func (ls *lines) waiter() string {
	ls.once.Do(func() {
		var b [16]byte
		_, _ = rand.Read(b[:])
		ls.id = hex.EncodeToString(b[:])
	})
	return ls.id
}

// stopMarkTimeout bounds the StopWaiting that the last waiter of a name
// sends when it leaves while the store may hold the Locker's mark.
const stopMarkTimeout = time.Second

// acquireInLine is Acquire for a caller that waits with w. When the store
// keeps no line it is a plain Acquire (the caller polls), except that a
// fair wait fails at once: fairness cannot be had.
func (l *Locker) acquireInLine(ctx context.Context, w *line.Wait, name, owner string, ttl time.Duration) (lease.Lease, error) {
	const op = "acquire"
	s, _ := l.store.(TurnWatcher)
	ok := storeCan[TurnWatcher](l.store) && !l.lines.noLine.Load()
	if ok {
		n, head, err := l.lines.join(ctx, l, s, w, name)
		switch {
		case errors.Is(err, errors.ErrUnsupported):
			ok = false
		case err != nil:
			return lease.Lease{}, l.fail(ctx, op, name, err)
		case !head:
			l.lines.mu.Lock()
			he := n.busy
			l.lines.mu.Unlock()
			he.Name = name
			if he.Remaining <= 0 {
				he.Remaining = w.Retry
			}
			return lease.Lease{}, &he
		default:
			return l.headAcquire(ctx, s, n, w, name, owner, ttl)
		}
	}
	if w.Fair {
		return lease.Lease{}, fmt.Errorf("%s: %s %s: lease.WithFairWait needs a store that keeps a line of waiters, and this %s store does not: %w",
			l.prefix, op, Quote(name), l.Backend(), errors.ErrUnsupported)
	}
	return l.acquire(ctx, op, name, owner, ttl, false, func() (Tenure, error) {
		return l.store.Acquire(ctx, name, owner, ttl)
	})
}

// headAcquire is the head's attempt: AcquireOrWait with the Locker's mark.
func (l *Locker) headAcquire(ctx context.Context, s TurnWatcher, n *nameLine, w *line.Wait, name, owner string, ttl time.Duration) (lease.Lease, error) {
	ls := &l.lines
	ls.mu.Lock()
	m := Mark{Waiter: ls.waiter(), Life: w.Life(), Keep: len(n.waits) > 1, Fair: w.Fair}
	ls.mu.Unlock()
	got, err := l.acquire(ctx, "acquire", name, owner, ttl, w.Fair, func() (Tenure, error) {
		return s.AcquireOrWait(ctx, name, owner, ttl, m)
	})
	ls.mu.Lock()
	// A mark stays after a busy answer, after an acquisition that kept
	// it, and, for all the Locker knows, after a failure.
	n.marked = err != nil || m.Keep
	if he := (*lease.HeldError)(nil); errors.As(err, &he) {
		n.busy = *he
	}
	ls.mu.Unlock()
	return got, err
}

// join puts w in the Locker's line for name at its first call and says
// whether w is the head. The first waiter of a name sets up the turn
// Watch; a watch that fails for another reason than
// errors.ErrUnsupported is tried again at the head's next attempt (the
// waiters retry meanwhile at w.Retry).
func (ls *lines) join(ctx context.Context, l *Locker, s TurnWatcher, w *line.Wait, name string) (n *nameLine, head bool, err error) {
	ls.mu.Lock()
	if ls.names == nil {
		ls.names = map[string]*nameLine{}
	}
	n = ls.names[name]
	if n == nil {
		n = &nameLine{stop: make(chan struct{})}
		ls.names[name] = n
	}
	if w.Take(func(acquired bool) { ls.leave(l, s, name, n, w, acquired) }) {
		n.waits = append(n.waits, w)
	} else if !slices.Contains(n.waits, w) {
		ls.mu.Unlock()
		return nil, false, errors.New("a wait serves one name of one Locker")
	}
	head = n.waits[0] == w
	setup := head && n.watch == nil && !n.setup
	n.setup = n.setup || setup
	ls.mu.Unlock()
	if !setup {
		return n, head, nil
	}
	watch, cancel, err := ls.watch(ctx, s, name)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	n.setup = false
	if errors.Is(err, errors.ErrUnsupported) {
		ls.noLine.Store(true)
		return n, head, err
	}
	if err != nil {
		// The attempt goes on without a watch (a store that is down fails
		// it anyway); the head's next attempt sets the watch up again.
		return n, head, nil
	}
	if ls.names[name] != n { // everyone left meanwhile
		watch.Stop()
		cancel()
		return n, head, nil
	}
	n.watch, n.cancel = watch, cancel
	n.relay.Add(1)
	go func() {
		defer n.relay.Done()
		for {
			select {
			case <-n.stop:
				return
			case <-watch.Changed():
				ls.mu.Lock()
				if len(n.waits) > 0 {
					n.waits[0].Wake()
				}
				ls.mu.Unlock()
			}
		}
	}()
	return n, head, nil
}

// watch sets up the Locker's turn Watch of name. Setting it up is bounded
// by ctx; the Watch then lasts until its cancel is called.
func (ls *lines) watch(ctx context.Context, s TurnWatcher, name string) (Watch, context.CancelFunc, error) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopBound := context.AfterFunc(ctx, cancel)
	watch, err := s.WatchTurn(wctx, name, ls.waiter())
	if !stopBound() { // ctx ended while setting up: the watch is dead
		if err == nil {
			watch.Stop()
		}
		cancel()
		return nil, nil, context.Cause(ctx)
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return watch, cancel, nil
}

// leave takes w out of the line of name when its caller is done waiting.
// A head that gave up makes the next waiter the head at once (the name
// may be free); the last waiter drops the line: its turn Watch, and the
// Locker's mark in the store.
func (ls *lines) leave(l *Locker, s TurnWatcher, name string, n *nameLine, w *line.Wait, acquired bool) {
	ls.mu.Lock()
	wasHead := len(n.waits) > 0 && n.waits[0] == w
	for i, o := range n.waits {
		if o == w {
			n.waits = append(n.waits[:i], n.waits[i+1:]...)
			break
		}
	}
	if len(n.waits) > 0 {
		if wasHead && !acquired {
			n.waits[0].Wake()
		}
		ls.mu.Unlock()
		return
	}
	if ls.names[name] != n { // dropped by Close
		ls.mu.Unlock()
		return
	}
	delete(ls.names, name)
	close(n.stop)
	watch, cancel, marked := n.watch, n.cancel, n.marked
	ls.mu.Unlock()
	n.relay.Wait()
	if watch != nil {
		watch.Stop()
		cancel()
	}
	if marked && !l.closed.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), stopMarkTimeout)
		defer cancel()
		// A mark left behind lapses by itself; until then, releases
		// would wake this Locker, which no longer waits, instead of
		// another.
		_ = s.StopWaiting(ctx, name, ls.waiter())
	}
}

// closeAll drops every line, for Close: the waiters then retry at their
// Retry and fail as the Locker is closed.
func (ls *lines) closeAll() {
	type drop struct {
		n      *nameLine
		watch  Watch
		cancel context.CancelFunc
	}
	ls.mu.Lock()
	var dropped []drop
	for name, n := range ls.names {
		delete(ls.names, name)
		close(n.stop)
		dropped = append(dropped, drop{n, n.watch, n.cancel})
	}
	ls.mu.Unlock()
	for _, d := range dropped {
		d.n.relay.Wait()
		if d.watch != nil {
			d.watch.Stop()
			d.cancel()
		}
	}
}
