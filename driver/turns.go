package driver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasekit/lease"
)

// turns is a Locker's side of waiting through a TurnWatcher: its waiter
// ID, and for each name it waits for, how many turn Watches it has and
// whether the store may hold its mark.
type turns struct {
	once  sync.Once
	id    string
	mu    sync.Mutex
	names map[string]*turnName
}

// turnName is what a Locker knows of its waiting for one name.
type turnName struct {
	watches int  // turn Watches not stopped yet
	marked  bool // an AcquireOrWait may have left a mark that is still there
}

// waiter returns the Locker's waiter ID: 16 random bytes in hex, drawn
// once.
func (t *turns) waiter() string {
	t.once.Do(func() {
		var b [16]byte
		_, _ = rand.Read(b[:])
		t.id = hex.EncodeToString(b[:])
	})
	return t.id
}

// stopMarkTimeout bounds the StopWaiting that the last turn Watch of a
// name sends when it stops while the Locker may have a mark there.
const stopMarkTimeout = time.Second

// WatchTurn implements lease.TurnWaiter through the Store's TurnWatcher,
// and returns an error matching errors.ErrUnsupported when the Store is
// not one. When the last turn Watch of a name stops while the Locker may
// still have a mark on it, Stop takes the mark away (one round trip,
// bounded by a second), so that releases no longer wake this Locker.
func (l *Locker) WatchTurn(ctx context.Context, name string) (lease.Watch, error) {
	s, ok := l.store.(TurnWatcher)
	w, err := l.watch(ctx, "watch turn", name, ok, func() (lease.Watch, error) { return s.WatchTurn(ctx, name, l.turns.waiter()) })
	if err != nil {
		return nil, err
	}
	l.turns.mu.Lock()
	if l.turns.names == nil {
		l.turns.names = map[string]*turnName{}
	}
	n := l.turns.names[name]
	if n == nil {
		n = &turnName{}
		l.turns.names[name] = n
	}
	n.watches++
	l.turns.mu.Unlock()
	return &turnWatch{Watch: w, l: l, s: s, name: name}, nil
}

// turnWatch is a Store's turn Watch with the Locker's bookkeeping.
type turnWatch struct {
	lease.Watch
	l    *Locker
	s    TurnWatcher
	name string
	once sync.Once
}

// Stop implements lease.Watch.
func (w *turnWatch) Stop() {
	w.once.Do(func() {
		w.Watch.Stop()
		t := &w.l.turns
		t.mu.Lock()
		n := t.names[w.name]
		n.watches--
		unmark := n.watches == 0 && n.marked
		if n.watches == 0 {
			delete(t.names, w.name)
		}
		t.mu.Unlock()
		if unmark && !w.l.closed.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), stopMarkTimeout)
			defer cancel()
			// A mark left behind lapses by itself; until then, releases
			// wake this Locker, which no longer waits, instead of another.
			_ = w.s.StopWaiting(ctx, w.name, t.waiter())
		}
	})
}

// AcquireOrWait implements lease.TurnWaiter through the Store's
// TurnWatcher, with Acquire's checks and results, and reports
// errors.ErrUnsupported when the Store is not one. The mark it leaves
// lasts lease.MarkLife. When it acquires while the Locker has other turn
// Watches on name (other callers of this Locker wait for it too), the
// mark goes to the back of the line instead of away.
func (l *Locker) AcquireOrWait(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	const op = "acquire or wait"
	s, ok := l.store.(TurnWatcher)
	if !ok {
		return lease.Lease{}, fmt.Errorf("%s: %s: %w", l.prefix, op, errors.ErrUnsupported)
	}
	if err := CheckAcquire(name, owner, ttl); err != nil {
		return lease.Lease{}, l.invalid(op, err)
	}
	if err := l.begin(ctx); err != nil {
		return lease.Lease{}, l.fail(ctx, op, name, err)
	}
	t := &l.turns
	m := Mark{Waiter: t.waiter(), Life: lease.MarkLife}
	t.mu.Lock()
	n := t.names[name]
	m.Keep = n != nil && n.watches > 1
	t.mu.Unlock()
	held, err := l.acquire(ctx, op, name, owner, ttl, func() (Tenure, error) {
		return s.AcquireOrWait(ctx, name, owner, ttl, m)
	})
	t.mu.Lock()
	if n := t.names[name]; n != nil {
		// A mark stays after a busy answer, after an acquisition that kept
		// it, and, for all the Locker knows, after a failure.
		n.marked = err != nil || m.Keep
	}
	t.mu.Unlock()
	return held, err
}
