package etcdlease

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	_ driver.Watcher = (*Locker)(nil)
	_ driver.Watcher = (*store)(nil)
)

// watches is the etcd side of a Locker's Watches: one clientv3.Watcher of
// the Locker's own (closed by Close, never the caller's client's), on
// which every etcd watch is put with a context carrying the same metadata
// (only WithRequireLeader's), so that clientv3 multiplexes them all on one
// gRPC Watch stream; and, per name, one subscription (sub) that every
// Watch of the name on this Locker shares. A subscription whose last
// Watch stopped lingers (see linger), so that a Watch that stops and the
// next one on the same name cost no request. It also counts the
// goroutines the subscriptions run, so that Close can wait for them.
type watches struct {
	mu     sync.Mutex
	w      clientv3.Watcher // nil until the first Watch
	closed bool
	wg     sync.WaitGroup
	subs   map[string]*sub // by name
	// idle holds the lingering subscriptions (*sub), the one idle longest
	// first.
	idle list.List
	// linger and maxIdle are lingerTime and maxLingering; tests change
	// them.
	linger  time.Duration
	maxIdle int
}

const (
	// lingerTime is how long a subscription stays after its last Watch
	// stopped, for the next Watch of the name to reuse.
	lingerTime = 30 * time.Second
	// maxLingering bounds the lingering subscriptions of a Locker; past
	// it, the one idle longest ends.
	maxLingering = 1024
)

// sub is a Locker's subscription to one name: an etcd watch on the name's
// key and one on its pass key (see turns.go), followed by one goroutine,
// which wakes the name's Watches; marks is the prefix of the name's marks,
// which the goroutine reads to choose a waiter.
type sub struct {
	name, key, pass, marks string
	cancel                 context.CancelFunc
	// Under watches.mu:
	watches   map[*watch]struct{}
	idle      *list.Element // non-nil while lingering
	idleSince time.Time
	// poke tells the goroutine that the subscription became idle or busy.
	poke chan struct{}
}

// close waits for the subscriptions' goroutines (the caller has ended the
// Locker's life context, which ends them) and closes the watch stream.
func (ws *watches) close() {
	ws.mu.Lock()
	ws.closed = true
	w := ws.w
	ws.mu.Unlock()
	ws.wg.Wait()
	if w != nil {
		_ = w.Close()
	}
}

// join adds w to name's subscription, if there is one, and reports
// whether there was.
func (ws *watches) join(name string, w *watch) (bool, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return false, lease.ErrClosed
	}
	sb := ws.subs[name]
	if sb == nil {
		return false, nil
	}
	ws.add(sb, w)
	return true, nil
}

// add adds w to sb, which stops lingering. The caller holds ws.mu.
func (ws *watches) add(sb *sub, w *watch) {
	sb.watches[w] = struct{}{}
	w.sub = sb
	if sb.idle != nil {
		ws.idle.Remove(sb.idle)
		sb.idle = nil
		poke(sb)
	}
}

func poke(sb *sub) {
	select {
	case sb.poke <- struct{}{}:
	default:
	}
}

// install makes name's subscription with w as its first Watch, or adds w
// to the one a concurrent Watch installed meanwhile (ok false: then the
// caller starts nothing). The caller starts the new subscription's
// goroutine, which it has registered with ws.wg.
func (ws *watches) install(client *clientv3.Client, life context.Context, name string, w *watch, mk func() *sub) (sb *sub, cw clientv3.Watcher, ctx context.Context, ok bool, err error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return nil, nil, nil, false, lease.ErrClosed
	}
	if sb := ws.subs[name]; sb != nil {
		ws.add(sb, w)
		return sb, nil, nil, false, nil
	}
	if ws.w == nil {
		ws.w = clientv3.NewWatcher(client)
	}
	if ws.subs == nil {
		ws.subs = map[string]*sub{}
	}
	sb = mk()
	// Every watch's context carries the same metadata, so that they share
	// one stream; WithRequireLeader makes a member cut off from its
	// cluster cancel the watch instead of going quiet.
	ctx, sb.cancel = context.WithCancel(clientv3.WithRequireLeader(life))
	ws.subs[name] = sb
	ws.add(sb, w)
	ws.wg.Add(1)
	return sb, ws.w, ctx, true, nil
}

// leave takes w out of its subscription, which lingers once it has no
// Watch left; past maxIdle lingering ones, the one idle longest ends.
func (ws *watches) leave(w *watch) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	sb := w.sub
	if sb == nil {
		return
	}
	delete(sb.watches, w)
	if len(sb.watches) > 0 || ws.subs[sb.name] != sb {
		return
	}
	sb.idle = ws.idle.PushBack(sb)
	sb.idleSince = time.Now()
	poke(sb)
	for ws.idle.Len() > ws.maxLingering() {
		old := ws.idle.Remove(ws.idle.Front()).(*sub)
		old.idle = nil
		delete(ws.subs, old.name)
		old.cancel()
	}
}

func (ws *watches) maxLingering() int {
	if ws.maxIdle > 0 {
		return ws.maxIdle
	}
	return maxLingering
}

func (ws *watches) lingerFor() time.Duration {
	if ws.linger > 0 {
		return ws.linger
	}
	return lingerTime
}

// idleLeft says how long sb may still linger (0: end it now, and it is
// gone from the Locker's subscriptions), or lingering false when it has
// Watches.
func (ws *watches) idleLeft(sb *sub) (left time.Duration, lingering bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.subs[sb.name] != sb {
		return 0, true // ended already (maxIdle)
	}
	if sb.idle == nil {
		return 0, false
	}
	left = ws.lingerFor() - time.Since(sb.idleSince)
	if left <= 0 {
		ws.idle.Remove(sb.idle)
		sb.idle = nil
		delete(ws.subs, sb.name)
		return 0, true
	}
	return left, true
}

// lingering is how many subscriptions have no Watch.
func (ws *watches) lingering() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.idle.Len()
}

// wake wakes sb's plain Watches when plain and, when all, every turn
// Watch, else the turn Watches of waiter.
func (ws *watches) wake(sb *sub, plain, all bool, waiter string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range sb.watches {
		if w.turn && (all || w.waiter == waiter) || !w.turn && plain {
			w.Wake()
		}
	}
}

// hasTurn reports whether a turn Watch is on sb: only then does the
// choice of a release's waiter matter to it.
func (ws *watches) hasTurn(sb *sub) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range sb.watches {
		if w.turn {
			return true
		}
	}
	return false
}

// watch is one Watch on a name of an etcd Locker: plain, or a turn Watch
// of waiter (see turns.go).
type watch struct {
	driver.Signal
	ws        *watches
	sub       *sub // under ws.mu
	turn      bool
	waiter    string
	stopAfter func() bool // under ws.mu
	once      sync.Once
}

// Watch implements driver.Watcher with an etcd watch on the name's key.
// It reads the key (one linearizable Range) and watches it from the
// revision after that read, so that no deletion after Watch returns is
// missed, even if the watch reaches the server later. The Watch's channel
// receives when the key is deleted (a Release, a ForceRelease, or the
// expiry of the tenure's etcd lease, which etcd turns into a deletion)
// and when a put shows a tenure other than the one last seen (whose end
// was then not seen). When the etcd watch is cancelled (its revision was
// compacted, the member lost its leader, the stream failed for good), the
// channel receives, the key is read again and the watch starts again from
// the new revision, and the channel receives once more: a wake-up may be
// spurious, never missed.
//
// The Watches of a name on one Locker share its etcd watch, which stays
// for a while after the last of them stops (see watches): a Watch of a
// name that a Locker watched lately sends no request at all.
func (s *store) Watch(ctx context.Context, name string) (driver.Watch, error) {
	return s.watch(ctx, name, false, "")
}

// watch starts a plain Watch, or a turn Watch of waiter.
func (s *store) watch(ctx context.Context, name string, turn bool, waiter string) (driver.Watch, error) {
	w := &watch{Signal: driver.NewSignal(), ws: &s.watches, turn: turn, waiter: waiter}
	ok, err := s.watches.join(name, w)
	if err != nil {
		return nil, err
	}
	if !ok {
		created, rev, err := s.watchFrom(ctx, s.key(name))
		if err != nil {
			return nil, err
		}
		sb, cw, wctx, started, err := s.watches.install(s.client, s.life, name, w, func() *sub { return s.newSub(name) })
		if err != nil {
			return nil, err
		}
		if started {
			go func() {
				defer s.watches.wg.Done()
				defer sb.cancel()
				chs, acancel := s.watchAgain(wctx, cw, sb, rev)
				s.follow(wctx, cw, sb, created, acancel, chs)
			}()
		}
	}
	stop := context.AfterFunc(ctx, w.end)
	s.watches.mu.Lock()
	w.stopAfter = stop
	s.watches.mu.Unlock()
	return w, nil
}

// newSub is a new subscription to name, with no Watch yet.
func (s *store) newSub(name string) *sub {
	return &sub{name: name, key: s.key(name), pass: s.passKey(name), marks: s.marksPrefix(name), watches: map[*watch]struct{}{}, poke: make(chan struct{}, 1)}
}

// watchBoth puts the etcd watches of sb on cw from revision rev+1: the
// name's key and its pass key (see turns.go).
func (s *store) watchBoth(ctx context.Context, cw clientv3.Watcher, sb *sub, rev int64) [2]clientv3.WatchChan {
	return [2]clientv3.WatchChan{
		cw.Watch(ctx, sb.key, clientv3.WithRev(rev+1)),
		cw.Watch(ctx, sb.pass, clientv3.WithRev(rev+1), clientv3.WithFilterDelete()),
	}
}

// watchAgain puts new etcd watches of sb on cw from revision rev+1, with
// a context of their own that cancel ends.
func (s *store) watchAgain(ctx context.Context, cw clientv3.Watcher, sb *sub, rev int64) (chs [2]clientv3.WatchChan, cancel context.CancelFunc) {
	actx, cancel := context.WithCancel(ctx)
	return s.watchBoth(actx, cw, sb, rev), cancel
}

// watchFrom reads key and returns the create revision of the tenure on
// it (0: none) and the revision of the read.
func (s *store) watchFrom(ctx context.Context, key string) (created, rev int64, err error) {
	r, err := s.client.Get(ctx, key, clientv3.WithKeysOnly())
	if err != nil {
		return 0, 0, fmt.Errorf("read the key to watch: %w", err)
	}
	if len(r.Kvs) > 0 {
		created = r.Kvs[0].CreateRevision
	}
	return created, r.Header.Revision, nil
}

// markWaiter is the waiter of the mark key under marks.
func markWaiter(key, marks string) string {
	rest := strings.TrimPrefix(key, marks)
	if i := strings.IndexByte(rest, waitSep[0]); i >= 0 {
		return rest[:i]
	}
	return rest
}

// chosen is the decision of the turn that an event at revision rev freed
// (a deletion of the name's key, or a put of its pass key): the waiter of
// the mark created first among the marks as they were at rev, read at
// that revision (one Range, sorted by create revision, limit 1). It is a
// function of etcd's state at rev alone, so every Locker that watches the
// name decides the same, whatever it has seen of the marks. The Range is
// serializable: a past revision's state is the same on every member that
// has applied it, and the member that sent the event has, so the read
// needs no round of the leader's; a member that has not yet applied rev
// (ErrFutureRev) is asked again linearizably. ok is false when there is
// no mark: every turn Watch wakes.
func (s *store) chosen(ctx context.Context, marks string, rev int64) (waiter string, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1)}
	r, err := s.client.Get(ctx, marks, append(opts, clientv3.WithSerializable())...)
	if err != nil && (errors.Is(err, rpctypes.ErrFutureRev) || rpctypes.ErrorDesc(err) == rpctypes.ErrFutureRev.Error()) {
		r, err = s.client.Get(ctx, marks, opts...)
	}
	if err != nil || len(r.Kvs) == 0 {
		return "", false, err
	}
	return markWaiter(string(r.Kvs[0].Key), marks), true, nil
}

// watchRetry bounds the wait between attempts to set a cancelled watch up
// again.
const watchRetry = time.Second

// follow turns the events of chs, the etcd watches of sb's key and pass
// key (whose context acancel cancels), into wake-ups until ctx ends, or
// sb has lingered long enough; it sets the watches up again whenever etcd
// cancels one. created is the create revision of the tenure the read
// before the watches found (0: none).
//
// Each event is judged on its own, by etcd's state at its revision (see
// apply), so the order in which the two watches' channels deliver their
// events does not matter.
func (s *store) follow(ctx context.Context, cw clientv3.Watcher, sb *sub, created int64, acancel context.CancelFunc, chs [2]clientv3.WatchChan) {
	defer func() { acancel() }()
	backoff := time.Duration(0)
	var timer *time.Timer
	var timerC <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	linger := func() bool {
		left, idle := s.watches.idleLeft(sb)
		if timer != nil {
			timer.Stop()
			timer, timerC = nil, nil
		}
		switch {
		case idle && left == 0:
			return false
		case idle:
			timer = time.NewTimer(left)
			timerC = timer.C
		}
		return true
	}
	linger()
	for {
		var resp clientv3.WatchResponse
		var ok, pass bool
		select {
		case <-ctx.Done():
			return
		case <-sb.poke:
			if !linger() {
				return
			}
			continue
		case <-timerC:
			timer, timerC = nil, nil
			if !linger() {
				return
			}
			continue
		case resp, ok = <-chs[0]:
		case resp, ok = <-chs[1]:
			pass = true
		}
		if ctx.Err() != nil {
			return
		}
		if ok && !resp.Canceled && resp.Err() == nil && resp.CompactRevision == 0 {
			if len(resp.Events) > 0 {
				backoff = 0
			}
			for _, ev := range resp.Events {
				s.apply(ctx, sb, &created, ev, pass)
			}
			continue
		}
		// A watch ended with ctx still live: whatever happened between
		// its last event and the next read went unseen, so wake now and
		// again once the new watches are in place. A watch that keeps
		// ending before any event is set up again ever more slowly.
		acancel()
		s.watches.wake(sb, true, true, "")
		for {
			if backoff > 0 {
				t := time.NewTimer(backoff)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			backoff = min(max(2*backoff, 10*time.Millisecond), watchRetry)
			fresh, rev, err := s.watchFrom(ctx, sb.key)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				created = fresh
				chs, acancel = s.watchAgain(ctx, cw, sb, rev)
				s.watches.wake(sb, true, true, "")
				break
			}
		}
	}
}

// apply wakes sb's Watches for ev, an event of the name's key or (pass)
// a put of its pass key, and keeps *created, the create revision of the
// tenure last seen on the key (0: none), up to date.
//
// A deletion of the key (a Release, a ForceRelease, an expiry) wakes the
// plain Watches, and the turn Watches that chosen names for its
// revision; a put of the pass key (a StopWaiting that passed the turn
// on) wakes the turn Watches that chosen names for its revision, and no
// plain Watch. A put of the key that shows another tenure than the one
// last seen, whose end went unseen, wakes every Watch. The read of the
// choice is made only when a turn Watch is there to be chosen; a read
// that fails wakes every turn Watch: a wake-up more, never one missed.
func (s *store) apply(ctx context.Context, sb *sub, created *int64, ev *clientv3.Event, pass bool) {
	switch {
	case pass || ev.Type == mvccpb.DELETE:
		if !pass {
			// The next Acquire need not read first.
			s.busy.free(sb.name)
			*created = 0
		}
		if !s.watches.hasTurn(sb) {
			s.watches.wake(sb, !pass, false, "")
			return
		}
		waiter, ok, err := s.chosen(ctx, sb.marks, ev.Kv.ModRevision)
		s.watches.wake(sb, !pass, err != nil || !ok, waiter)
	case ev.Kv.CreateRevision != *created:
		if *created != 0 {
			s.watches.wake(sb, true, true, "")
		}
		*created = ev.Kv.CreateRevision
	}
}

// Stop implements driver.Watch: the Watch receives no more wake-ups. The
// name's etcd watch stays for the Locker's next Watch of the name (see
// watches); Stop sends nothing.
func (w *watch) Stop() {
	w.end()
	w.ws.mu.Lock()
	stop := w.stopAfter
	w.ws.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// end takes the Watch out of its subscription, at Stop or when the
// Watch's context ends.
func (w *watch) end() {
	w.once.Do(func() { w.ws.leave(w) })
}
