package sqllease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/hub"
)

// Waiting woken by PostgreSQL (LISTEN/NOTIFY).
//
// A Locker given a Listener (WithListener; backend/sql/postgres's Open
// gives one) implements driver.Watcher: lease.Run's WithWait and the
// lease command's --wait then wake when the name is released instead of
// polling. The Locker keeps one listening connection of its own, outside
// the pool, from its first Watch until Close. On it, it LISTENs on the
// table's channel (channelFor) and, for each name watched, holds a
// session-level shared advisory lock on (class, the first four bytes of
// the name's key): the name's watch lock, which says that somebody
// watches the name. The release and force-release statements of every
// PostgreSQL Locker (postgresNotify) try that lock exclusively, and
// NOTIFY the channel with the key only when the try fails, that is when
// somebody watches the name: NOTIFY serializes commits, so a release that
// nobody waits for does not pay for it. A watch lock that collides with
// another name's costs a needless NOTIFY, never a missed one. (Watch
// locks are not marks: a mark is a waiter's place in the line of a name,
// a row of the marks table, turns.go.)
//
// Wake-ups are hints: a waiter still goes through Acquire. When the
// listening connection drops, every watch wakes at once and again once
// its watch lock is back on a new connection, since a release in between
// went unheard; expiry notifies nobody (lease.Run wakes at the holder's
// remaining time for it).
//
// The payload of a notification is the key in hex, followed, when the
// release found a waiter's mark in the name's line (turns.go), by a space
// and that Locker's waiter ID. Plain watches wake at every notification
// of their name; turn watches (WatchTurn) only when it names their Locker
// or nobody.
//
// Stopping a watch sends nothing. When the last watch of a name stops,
// its watch lock lingers on the listening connection, where a new watch
// of the name finds it in place and returns at once; the loop gives
// lingering watch locks back later, listenLinger after their last watch
// stopped, the oldest first beyond maxLingering of them, in one statement
// per batch. A lingering watch lock wakes nobody; all it costs is a
// needless NOTIFY at each release of the name, from any Locker, until it
// goes.

// A Listener opens the connections on which a PostgreSQL Locker listens
// for releases (see WithListener). backend/sql/postgres's Listener is one
// for pgx.
type Listener interface {
	// Connect opens a new connection to the Locker's database, separate
	// from its pool, within ctx.
	Connect(ctx context.Context) (ListenConn, error)
}

// A ListenConn is one connection of a Listener. The Locker uses it from
// one goroutine at a time.
type ListenConn interface {
	// Exec runs one statement that returns no rows (LISTEN).
	Exec(ctx context.Context, sql string) error
	// QueryBool runs one statement that returns one boolean.
	QueryBool(ctx context.Context, sql string) (bool, error)
	// WaitForNotification returns the channel and payload of the next
	// notification, waiting for one until ctx ends. An error caused by
	// ctx ending must leave the connection usable (pgx's does).
	WaitForNotification(ctx context.Context) (channel, payload string, err error)
	// Close closes the connection.
	Close() error
}

// WithListener makes a PostgreSQL Locker a driver.Watcher whose waits are
// woken by the database (LISTEN/NOTIFY, see the package documentation):
// l opens the Locker's one listening connection. backend/sql/postgres's
// Open gives it on its own; with New, pass postgreslease.Listener. Given
// for another dialect, New fails with an error matching lease.ErrInvalid.
func WithListener(l Listener) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: WithListener(nil)", lease.ErrInvalid)
		}
		o.listener = l
		return nil
	}
}

// channelFor returns the NOTIFY channel of a table, named as the catalog
// qualified it, and the first key of its names' watch locks. A channel is
// an identifier of at most 63 bytes.
func channelFor(table string) (string, int32) {
	ch := "lease:" + table
	if len(ch) > 63 {
		sum := sha256.Sum256([]byte(table))
		ch = "lease:" + hex.EncodeToString(sum[:16])
	}
	h := fnv.New32a()
	h.Write([]byte(ch))
	return ch, int32(h.Sum32())
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// quoteIdent quotes s as an SQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// watchLockKey is the second key of a name's watch lock: the first four
// bytes of its row key, as postgresNotify reads them.
func watchLockKey(k []byte) int32 {
	return int32(uint32(k[0])<<24 | uint32(k[1])<<16 | uint32(k[2])<<8 | uint32(k[3]))
}

const (
	// listenSetup bounds how long Watch waits for its watch lock to be in place
	// (a connection to open, LISTEN, the lock); past it Watch fails and
	// lease.Run polls instead.
	listenSetup = 5 * time.Second
	// listenIdle is how long the listening connection may stay silent
	// before the Locker pings it; a failed ping counts as a drop.
	listenIdle = 5 * time.Second
	// listenStatement bounds each statement on the listening connection.
	listenStatement = 5 * time.Second
	// listenBackoff bounds the wait between attempts to connect again.
	listenBackoff = time.Second
	// lockRetry is how soon a watch lock that could not be taken (a release of
	// the name holding the lock for its commit) is tried again.
	lockRetry = 20 * time.Millisecond
	// listenLinger is how long a name's watch lock stays on the listening
	// connection after its last watch stopped, for the next watch of
	// the name to find.
	listenLinger = 30 * time.Second
	// maxLingering bounds the watch locks that linger so: beyond it the
	// oldest are given back first.
	maxLingering = 1024
)

// listening is a Locker's listening side: the transport of its
// subscription hub (internal/hub), which keeps the names watched (by the
// hex of the name's key) with their watches, and lets a name's watch
// lock linger after its last watch stopped. Its one connection is owned
// by one goroutine (loop), from the first Watch until Close.
type listening struct {
	hub.Hub[watchLock]
	listener Listener
	channel  string
	class    int32

	// Under the hub's lock:
	pending bool               // the loop has watch locks to take or give back
	stop    context.CancelFunc // ends the loop's current wait; nil if none
	life    context.Context
	end     context.CancelFunc
	done    chan struct{} // closed when loop returns; nil before it starts
}

// watchLock is the PostgreSQL side of one name watched: its watch lock.
type watchLock struct {
	lock int32 // the second key of its watch lock (watchLockKey)
	// locked says the listening connection holds the watch lock.
	locked bool
}

type watched = hub.Sub[watchLock]

// init makes h the transport of its hub.
func (h *listening) init() {
	h.Init(h, hub.Limits{Linger: listenLinger, MaxIdle: maxLingering, TrimTo: maxLingering, Setup: listenSetup,
		SetupFailed: func(k string) error {
			name := k
			if b, err := hex.DecodeString(k); err == nil {
				name = string(b)
			}
			return fmt.Errorf("could not listen for releases of %q within %s (the listening connection is down, or the name's watch lock is taken)", name, listenSetup)
		}})
}

// pokeLocked has the loop look at the watch locks again, interrupting its
// wait.
func (h *listening) pokeLocked() {
	h.pending = true
	if h.stop != nil {
		h.stop()
		h.stop = nil
	}
}

// Watch implements driver.Watcher on a Locker with a Listener.
func (s *store) Watch(ctx context.Context, name string) (driver.Watch, error) {
	if s.listener == nil {
		return nil, fmt.Errorf("the Locker has no Listener (WithListener, PostgreSQL only): %w", errors.ErrUnsupported)
	}
	if err := s.setup(ctx); err != nil {
		return nil, err // setup described it
	}
	return s.watch(ctx, name, "")
}

// watch is Watch, and with a waiter WatchTurn, on a store set up with a
// Listener.
func (s *store) watch(ctx context.Context, name, waiter string) (driver.Watch, error) {
	h := &s.hub
	h.Lock()
	if h.done == nil && !h.Closed() {
		h.listener = s.listener
		h.channel, h.class = channelFor(s.qualified)
		h.life, h.end = context.WithCancel(context.Background())
		h.done = make(chan struct{})
		go h.loop()
	}
	h.Unlock()
	w, err := h.Watch(ctx, hex.EncodeToString(key(name)), waiter != "", waiter)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Subscribe implements hub.Transport: the loop takes the name's watch
// lock, unless the connection still holds it (a lingering lock that was
// about to go).
func (h *listening) Subscribe(e *watched) {
	k, _ := hex.DecodeString(e.Key)
	e.State.lock = watchLockKey(k)
	if e.State.locked {
		e.Ready()
		return
	}
	h.pokeLocked()
}

// Unsubscribe implements hub.Transport: the loop gives the watch locks
// back, in one statement.
func (h *listening) Unsubscribe([]*watched) { h.pokeLocked() }

// close wakes the watches, ends the loop and waits for it; Watch fails
// with lease.ErrClosed from then on.
func (h *listening) close() {
	h.Close()
	h.Lock()
	done := h.done
	if h.end != nil {
		h.end()
	}
	h.Unlock()
	if done != nil {
		<-done
	}
}

// loop owns the listening connection until the Locker closes: it opens it
// (again after a drop), takes and gives back watch locks, wakes the
// watches of each name notified, and pings a silent connection.
func (h *listening) loop() {
	defer close(h.done)
	var (
		conn    ListenConn
		backoff time.Duration
	)
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for h.life.Err() == nil {
		if conn == nil {
			if !h.sleep(backoff) {
				return
			}
			c, err := h.connect()
			if err != nil {
				backoff = min(max(2*backoff, 50*time.Millisecond), listenBackoff)
				continue
			}
			conn, backoff = c, 0
		}
		h.Lock()
		h.pending = false
		h.Unlock()
		retry, err := h.sync(conn)
		if err != nil {
			conn = h.dropped(conn)
			continue
		}
		h.Lock()
		if h.pending || h.life.Err() != nil {
			h.Unlock()
			continue
		}
		// A wait cut short (a lock to try again) ends without a ping.
		wait := listenIdle
		if retry {
			wait = lockRetry
		}
		wctx, cancel := context.WithTimeout(h.life, wait)
		h.stop = cancel
		h.Unlock()
		ch, payload, err := conn.WaitForNotification(wctx)
		h.Lock()
		h.stop = nil
		h.Unlock()
		ended := wctx.Err() // nil: the wait ended on its own
		cancel()
		switch {
		case h.life.Err() != nil:
			return
		case err == nil:
			if ch == h.channel {
				h.wake(payload)
			}
		case ended == nil:
			conn = h.dropped(conn) // the connection failed
		case errors.Is(ended, context.DeadlineExceeded) && !retry:
			// Silent for listenIdle: is the connection still there?
			pctx, pcancel := context.WithTimeout(h.life, listenStatement)
			_, err := conn.QueryBool(pctx, "SELECT true")
			pcancel()
			if err != nil && h.life.Err() == nil {
				conn = h.dropped(conn)
			}
		}
	}
}

// connect opens a listening connection and LISTENs on the channel.
func (h *listening) connect() (ListenConn, error) {
	ctx, cancel := context.WithTimeout(h.life, listenStatement)
	defer cancel()
	c, err := h.listener.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.Exec(ctx, "LISTEN "+quoteIdent(h.channel)); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// sync gives back the watch locks of the names the hub let go (they
// lingered long enough, or beyond the bound), all in one statement, and
// takes the watch locks of names watched. retry says some lock could not
// be taken.
func (h *listening) sync(conn ListenConn) (retry bool, err error) {
	var take, give, forget []*watched
	h.Lock()
	h.Each(func(e *watched) {
		switch {
		case e.Going() && e.State.locked:
			give = append(give, e)
		case e.Going():
			forget = append(forget, e)
		case !e.State.locked:
			take = append(take, e)
		}
	})
	for _, e := range forget {
		e.Forget()
	}
	for _, e := range give {
		// Unlocked from now: a watch of the name that comes while the
		// lock is given back waits for it to be taken again, and has
		// missed nothing then.
		e.State.locked = false
	}
	h.Unlock()
	if len(give) > 0 {
		keys := make([]string, len(give))
		for i, e := range give {
			keys[i] = strconv.Itoa(int(e.State.lock))
		}
		ctx, cancel := context.WithTimeout(h.life, listenStatement)
		// Each name gave its own shared lock: two names whose watch
		// locks collide hold it twice and give it back twice.
		_, err := conn.QueryBool(ctx, fmt.Sprintf("SELECT coalesce(bool_and(pg_advisory_unlock_shared(%d, k)), true) FROM unnest(ARRAY[%s]::int[]) AS k",
			h.class, strings.Join(keys, ",")))
		cancel()
		if err != nil {
			return false, err
		}
		h.Lock()
		for _, e := range give {
			if !e.Forget() {
				h.pending = true // watched again meanwhile: lock it again
			}
		}
		h.Unlock()
	}
	for _, e := range take {
		ctx, cancel := context.WithTimeout(h.life, listenStatement)
		ok, err := conn.QueryBool(ctx, fmt.Sprintf("SELECT pg_try_advisory_lock_shared(%d, %d)", h.class, e.State.lock))
		cancel()
		if err != nil {
			return false, err
		}
		h.Lock()
		if ok {
			// Ready wakes the watches when it is locked again after a
			// drop: a release in between went unheard.
			e.State.locked = true
			e.Ready()
		} else {
			// The lock is held exclusively: most likely a release of the
			// name is committing. Wake its watches and try again soon.
			e.Wake(true, true, "")
			retry = true
		}
		h.Unlock()
	}
	return retry, nil
}

// dropped closes a failed connection and returns nil: every watch lock
// went with it, so every watch wakes (a release may have gone unheard)
// and waits for its name's lock on the next connection.
func (h *listening) dropped(conn ListenConn) ListenConn {
	_ = conn.Close()
	h.Lock()
	defer h.Unlock()
	h.Lost()
	h.Each(func(e *watched) { e.State.locked = false })
	return nil
}

// wake wakes the watches that a notification concerns: its payload is the
// hex of a name's key, optionally followed by a space and the waiter ID
// the release chose (postgresNotifyTurn): the name's plain watches and,
// when it names no waiter, all its turn watches, else those of waiter.
func (h *listening) wake(payload string) {
	k, waiter, _ := strings.Cut(payload, " ")
	h.Lock()
	defer h.Unlock()
	if e := h.Get(k); e != nil {
		e.Wake(true, waiter == "", waiter)
	}
}

// sleep waits d, or until the Locker closes (false).
func (h *listening) sleep(d time.Duration) bool {
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
