package sqllease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
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

// hub is a Locker's listening side: one connection, the names watched on
// it, and one goroutine (loop) that owns the connection, from the first
// Watch until Close.
type hub struct {
	listener Listener
	channel  string
	class    int32

	// linger and maxLinger are listenLinger and maxLingering, except
	// in tests; set before the first Watch.
	linger    time.Duration
	maxLinger int

	mu      sync.Mutex
	names   map[string]*watched // by the hex of the name's key
	idle    int                 // names in names without a watch
	closed  bool
	pending bool               // the loop has watch locks to take or give back
	stop    context.CancelFunc // ends the loop's current wait; nil if none
	life    context.Context
	end     context.CancelFunc
	done    chan struct{} // closed when loop returns; nil before it starts
}

// watched is one name watched on the hub.
type watched struct {
	lock    int32 // the second key of its watch lock (watchLockKey)
	watches map[*pgWatch]struct{}
	// locked says the listening connection holds the watch lock; ever,
	// that it held it on an earlier connection while the name was
	// watched (not since a lingering lock was given back), so that a release
	// may have gone unheard since.
	locked, ever bool
	// ready is closed once locked on the current connection; a Watch
	// waits for it.
	ready  chan struct{}
	isOpen bool // ready is not closed yet
	// since is when the last watch stopped, while there is none.
	since time.Time
}

// pgWatch is one Watch of a PostgreSQL Locker.
type pgWatch struct {
	h   *hub
	key string
	// waiter is the Locker's waiter ID for a turn watch (WatchTurn),
	// empty for a plain one.
	waiter string
	driver.Signal
	stopAfter func() bool
	once      sync.Once
}

// Stop implements driver.Watch.
func (w *pgWatch) Stop() {
	if w.stopAfter != nil {
		w.stopAfter()
	}
	w.unwatch()
}

// unwatch takes the watch off its name, once. The watch's context ends
// it through unwatch rather than Stop: context.AfterFunc may run it
// before watch has stored stopAfter, which Stop reads.
func (w *pgWatch) unwatch() {
	w.once.Do(func() {
		h := w.h
		h.mu.Lock()
		if e := h.names[w.key]; e != nil {
			delete(e.watches, w)
			if len(e.watches) == 0 {
				// The watch lock lingers (see above): nothing to send now,
				// unless it has to go at once. The loop looks at
				// lingering watch locks at least every listenIdle; one that
				// lingers for less needs the loop to know.
				e.since = time.Now()
				h.idle++
				if h.linger < listenIdle || h.idle > h.maxLinger {
					h.pokeLocked()
				}
			}
		}
		h.mu.Unlock()
	})
}

// pokeLocked has the loop look at the watch locks again, interrupting its
// wait.
func (h *hub) pokeLocked() {
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
	k := key(name)
	w := &pgWatch{h: &s.hub, key: hex.EncodeToString(k), waiter: waiter, Signal: driver.NewSignal()}
	h := &s.hub
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, lease.ErrClosed
	}
	if h.done == nil {
		h.listener = s.listener
		h.channel, h.class = channelFor(s.qualified)
		h.names = map[string]*watched{}
		h.life, h.end = context.WithCancel(context.Background())
		h.done = make(chan struct{})
		go h.loop()
	}
	e := h.names[w.key]
	if e == nil {
		e = &watched{lock: watchLockKey(k), watches: map[*pgWatch]struct{}{}, ready: make(chan struct{}), isOpen: true}
		h.names[w.key] = e
	} else if len(e.watches) == 0 {
		h.idle-- // watched again: its watch lock, if it lingers, serves
	}
	e.watches[w] = struct{}{}
	if !e.locked {
		h.pokeLocked()
	}
	ready := e.ready
	h.mu.Unlock()

	t := time.NewTimer(listenSetup)
	defer t.Stop()
	select {
	case <-ready:
	case <-ctx.Done():
		w.Stop()
		return nil, ctx.Err()
	case <-t.C:
		w.Stop()
		return nil, fmt.Errorf("could not listen for releases of %q within %s (the listening connection is down, or the name's watch lock is taken)", name, listenSetup)
	}
	w.stopAfter = context.AfterFunc(ctx, w.unwatch)
	return w, nil
}

// close ends the loop and waits for it; Watch fails with lease.ErrClosed
// from then on.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	done := h.done
	if h.end != nil {
		h.end()
	}
	h.mu.Unlock()
	if done != nil {
		<-done
	}
}

// loop owns the listening connection until the Locker closes: it opens it
// (again after a drop), takes and gives back watch locks, wakes the
// watches of each name notified, and pings a silent connection.
func (h *hub) loop() {
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
		h.mu.Lock()
		h.pending = false
		h.mu.Unlock()
		retry, next, err := h.sync(conn)
		if err != nil {
			conn = h.dropped(conn)
			continue
		}
		h.mu.Lock()
		if h.pending || h.life.Err() != nil {
			h.mu.Unlock()
			continue
		}
		// A wait cut short (a lock to try again, a lingering lock to
		// give back) ends without a ping.
		wait, short := listenIdle, false
		if retry {
			wait, short = lockRetry, true
		}
		if d := time.Until(next); !next.IsZero() && d < wait {
			wait, short = max(d, time.Millisecond), true
		}
		wctx, cancel := context.WithTimeout(h.life, wait)
		h.stop = cancel
		h.mu.Unlock()
		ch, payload, err := conn.WaitForNotification(wctx)
		h.mu.Lock()
		h.stop = nil
		h.mu.Unlock()
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
		case errors.Is(ended, context.DeadlineExceeded) && !short:
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
func (h *hub) connect() (ListenConn, error) {
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

// sync takes the watch locks of names watched and gives back the
// lingering watch locks of names no longer watched that are due
// (listenLinger after their last watch stopped, or the oldest beyond
// maxLinger), all in one statement. retry says some lock could not be
// taken; next is when the next lingering lock falls due (zero if none
// lingers).
func (h *hub) sync(conn ListenConn) (retry bool, next time.Time, err error) {
	type job struct {
		key string
		e   *watched
	}
	var take, idle []job
	h.mu.Lock()
	for k, e := range h.names {
		switch {
		case len(e.watches) == 0 && e.locked:
			idle = append(idle, job{k, e})
		case len(e.watches) == 0:
			delete(h.names, k)
			h.idle--
		case !e.locked:
			take = append(take, job{k, e})
		}
	}
	// Oldest first: those past their linger, and beyond the bound.
	slices.SortFunc(idle, func(a, b job) int { return a.e.since.Compare(b.e.since) })
	due := time.Now().Add(-h.linger)
	var give []job
	for i, j := range idle {
		if len(idle)-i > h.maxLinger || !j.e.since.After(due) {
			give = append(give, j)
			continue
		}
		next = j.e.since.Add(h.linger)
		break
	}
	for _, j := range give {
		// Unlocked from now: a watch of the name that comes while the
		// lock is given back waits for it to be taken again, and has
		// missed nothing then.
		j.e.locked, j.e.ever = false, false
		if !j.e.isOpen {
			j.e.ready, j.e.isOpen = make(chan struct{}), true
		}
	}
	h.mu.Unlock()
	if len(give) > 0 {
		keys := make([]string, len(give))
		for i, j := range give {
			keys[i] = strconv.Itoa(int(j.e.lock))
		}
		ctx, cancel := context.WithTimeout(h.life, listenStatement)
		// Each name gave its own shared lock: two names whose watch
		// locks collide hold it twice and give it back twice.
		_, err := conn.QueryBool(ctx, fmt.Sprintf("SELECT coalesce(bool_and(pg_advisory_unlock_shared(%d, k)), true) FROM unnest(ARRAY[%s]::int[]) AS k",
			h.class, strings.Join(keys, ",")))
		cancel()
		if err != nil {
			return false, time.Time{}, err
		}
		h.mu.Lock()
		for _, j := range give {
			if len(j.e.watches) == 0 {
				delete(h.names, j.key)
				h.idle--
			} else {
				h.pending = true // watched again meanwhile: lock it again
			}
		}
		h.mu.Unlock()
	}
	for _, j := range take {
		ctx, cancel := context.WithTimeout(h.life, listenStatement)
		ok, err := conn.QueryBool(ctx, fmt.Sprintf("SELECT pg_try_advisory_lock_shared(%d, %d)", h.class, j.e.lock))
		cancel()
		if err != nil {
			return false, time.Time{}, err
		}
		h.mu.Lock()
		if ok {
			j.e.locked = true
			if j.e.isOpen {
				close(j.e.ready)
				j.e.isOpen = false
			}
			if j.e.ever {
				// Locked again after a drop: a release in between went
				// unheard.
				j.e.wakeLocked("")
			}
			j.e.ever = true
			if len(j.e.watches) == 0 {
				h.pending = true // stopped meanwhile: it lingers from now
			}
		} else {
			// The lock is held exclusively: most likely a release of the
			// name is committing. Wake its watches and try again soon.
			j.e.wakeLocked("")
			retry = true
		}
		h.mu.Unlock()
	}
	return retry, next, nil
}

// dropped closes a failed connection and returns nil: every watch lock
// went with it, so every watch wakes (a release may have gone unheard)
// and waits for its name's lock on the next connection.
func (h *hub) dropped(conn ListenConn) ListenConn {
	_ = conn.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, e := range h.names {
		if len(e.watches) == 0 {
			delete(h.names, k)
			h.idle--
			continue
		}
		e.locked = false
		if !e.isOpen {
			e.ready, e.isOpen = make(chan struct{}), true
		}
		e.wakeLocked("")
	}
	return nil
}

// wake wakes the watches that a notification concerns: its payload is the
// hex of a name's key, optionally followed by a space and the waiter ID
// the release chose (postgresNotifyTurn).
func (h *hub) wake(payload string) {
	k, waiter, _ := strings.Cut(payload, " ")
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.names[k]; e != nil {
		e.wakeLocked(waiter)
	}
}

// wakeLocked wakes the name's plain watches and, when waiter is empty,
// all its turn watches, else those of waiter.
func (e *watched) wakeLocked(waiter string) {
	for w := range e.watches {
		if waiter == "" || w.waiter == "" || w.waiter == waiter {
			w.Wake()
		}
	}
}

// sleep waits d, or until the Locker closes (false).
func (h *hub) sleep(d time.Duration) bool {
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
