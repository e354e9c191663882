package etcdlease

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	_ lease.Waiter   = (*Locker)(nil)
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
// key and one on the name's marks (see turns.go), followed by one
// goroutine, which wakes the name's Watches.
type sub struct {
	name, key, marks string
	cancel           context.CancelFunc
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

// wake wakes sb's plain Watches and, when all, every turn Watch, else the
// turn Watches of waiter.
func (ws *watches) wake(sb *sub, all bool, waiter string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range sb.watches {
		if !w.turn || all || w.waiter == waiter {
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
func (s *store) Watch(ctx context.Context, name string) (lease.Watch, error) {
	return s.watch(ctx, name, false, "")
}

// watch starts a plain Watch, or a turn Watch of waiter.
func (s *store) watch(ctx context.Context, name string, turn bool, waiter string) (lease.Watch, error) {
	w := &watch{Signal: driver.NewSignal(), ws: &s.watches, turn: turn, waiter: waiter}
	ok, err := s.watches.join(name, w)
	if err != nil {
		return nil, err
	}
	if !ok {
		key, marks := s.key(name), s.marksPrefix(name)
		st, rev, err := s.watchFrom(ctx, key, marks)
		if err != nil {
			return nil, err
		}
		sb, cw, wctx, started, err := s.watches.install(s.client, s.life, name, w, func() *sub {
			return &sub{name: name, key: key, marks: marks, watches: map[*watch]struct{}{}, poke: make(chan struct{}, 1)}
		})
		if err != nil {
			return nil, err
		}
		if started {
			go func() {
				defer s.watches.wg.Done()
				defer sb.cancel()
				chs, acancel := s.watchAgain(wctx, cw, sb, rev)
				s.follow(wctx, cw, sb, st, acancel, chs)
			}()
		}
	}
	stop := context.AfterFunc(ctx, w.end)
	s.watches.mu.Lock()
	w.stopAfter = stop
	s.watches.mu.Unlock()
	return w, nil
}

// watchBoth puts the etcd watches of sb on cw from revision rev+1.
func (s *store) watchBoth(ctx context.Context, cw clientv3.Watcher, sb *sub, rev int64) [2]clientv3.WatchChan {
	return [2]clientv3.WatchChan{
		cw.Watch(ctx, sb.key, clientv3.WithRev(rev+1)),
		cw.Watch(ctx, sb.marks, clientv3.WithPrefix(), clientv3.WithRev(rev+1)),
	}
}

// watchAgain puts new etcd watches of sb on cw from revision rev+1, with
// a context of their own that cancel ends.
func (s *store) watchAgain(ctx context.Context, cw clientv3.Watcher, sb *sub, rev int64) (chs [2]clientv3.WatchChan, cancel context.CancelFunc) {
	actx, cancel := context.WithCancel(ctx)
	return s.watchBoth(actx, cw, sb, rev), cancel
}

// seen is what a subscription's goroutine knows of its name: the create
// revision of the tenure last seen (0: none) and the marks, by key.
type seen struct {
	created int64
	marks   map[string]markSeen
	// marksAt is the revision up to which marks is known complete: the
	// read that set the subscription up, or the newest mark event since.
	marksAt int64
}

// markSeen is one waiter's mark as a subscription saw it.
type markSeen struct {
	waiter  string
	created int64
}

// watchFrom reads key and the marks under marks, in one read-only
// transaction, and returns what it found and the revision of the read.
func (s *store) watchFrom(ctx context.Context, key, marks string) (st seen, rev int64, err error) {
	r, err := s.client.Txn(ctx).Then(
		clientv3.OpGet(key, clientv3.WithKeysOnly()),
		clientv3.OpGet(marks, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err == nil && len(r.Responses) != 2 {
		err = errShortAnswer
	}
	if err != nil {
		return seen{}, 0, fmt.Errorf("read the key to watch: %w", err)
	}
	st.marks, st.marksAt = map[string]markSeen{}, r.Header.Revision
	if kvs := r.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		st.created = kvs[0].CreateRevision
	}
	for _, kv := range r.Responses[1].GetResponseRange().GetKvs() {
		st.marks[string(kv.Key)] = markSeen{waiter: markWaiter(string(kv.Key), marks), created: kv.CreateRevision}
	}
	return st, r.Header.Revision, nil
}

// marksAt reads the marks under marks as they were at revision rev.
func (s *store) marksAt(ctx context.Context, marks string, rev int64) (seen, error) {
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	r, err := s.client.Get(ctx, marks, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithRev(rev))
	if err != nil {
		return seen{}, err
	}
	st := seen{marks: map[string]markSeen{}, marksAt: rev}
	for _, kv := range r.Kvs {
		st.marks[string(kv.Key)] = markSeen{waiter: markWaiter(string(kv.Key), marks), created: kv.CreateRevision}
	}
	return st, nil
}

// markWaiter is the waiter of the mark key under marks.
func markWaiter(key, marks string) string {
	rest := strings.TrimPrefix(key, marks)
	if i := strings.IndexByte(rest, queueSep[0]); i >= 0 {
		return rest[:i]
	}
	return rest
}

// choose is the waiter whose mark, among those created before revision
// rev, was created first; ok is false when there is none.
func (st seen) choose(rev int64) (waiter string, ok bool) {
	var first int64
	for _, m := range st.marks {
		if m.created < rev && (!ok || m.created < first) {
			waiter, first, ok = m.waiter, m.created, true
		}
	}
	return waiter, ok
}

// watchRetry bounds the wait between attempts to set a cancelled watch up
// again.
const watchRetry = time.Second

// maxDrain bounds the watch responses a subscription's goroutine takes in
// at once to put their events in revision order.
const maxDrain = 64

// event is an event of one of a subscription's two etcd watches.
type event struct {
	ev   *clientv3.Event
	mark bool
}

// follow turns the events of chs, the etcd watches of sb's key and marks
// (whose context acancel cancels), into wake-ups until ctx ends,
// or sb has lingered long enough; it sets the watches up again whenever
// etcd cancels one. st is what the read before the watches found.
//
// The two watches' events reach follow on two channels, whose order is
// not the store's: follow takes in whatever both have ready and handles
// it in revision order, and a release the mark events have not caught up
// with is judged by the marks read at its revision (see apply).
func (s *store) follow(ctx context.Context, cw clientv3.Watcher, sb *sub, st seen, acancel context.CancelFunc, chs [2]clientv3.WatchChan) {
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
	var batch []event
	for {
		batch = batch[:0]
		broken := false
		take := func(resp clientv3.WatchResponse, ok, mark bool) {
			if !ok || resp.Canceled || resp.Err() != nil || resp.CompactRevision != 0 {
				broken = true
				return
			}
			for _, ev := range resp.Events {
				batch = append(batch, event{ev: ev, mark: mark})
			}
		}
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
		case resp, ok := <-chs[0]:
			take(resp, ok, false)
		case resp, ok := <-chs[1]:
			take(resp, ok, true)
		}
	drain:
		for range maxDrain {
			if broken {
				break
			}
			select {
			case resp, ok := <-chs[0]:
				take(resp, ok, false)
			case resp, ok := <-chs[1]:
				take(resp, ok, true)
			default:
				break drain
			}
		}
		if ctx.Err() != nil {
			return
		}
		if len(batch) > 0 {
			backoff = 0
		}
		// Marks first at a revision: an Acquire that takes its turn puts
		// the key and takes its mark away in one transaction.
		slices.SortStableFunc(batch, func(a, b event) int {
			if c := a.ev.Kv.ModRevision - b.ev.Kv.ModRevision; c != 0 {
				if c < 0 {
					return -1
				}
				return 1
			}
			switch {
			case a.mark && !b.mark:
				return -1
			case b.mark && !a.mark:
				return 1
			}
			return 0
		})
		for _, e := range batch {
			s.apply(ctx, sb, &st, e)
		}
		if !broken {
			continue
		}
		// A watch ended with ctx still live: whatever happened between
		// its last event and the next read went unseen, so wake now and
		// again once the new watches are in place. A watch that keeps
		// ending before any event is set up again ever more slowly.
		acancel()
		s.watches.wake(sb, true, "")
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
			fresh, rev, err := s.watchFrom(ctx, sb.key, sb.marks)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				st = fresh
				chs, acancel = s.watchAgain(ctx, cw, sb, rev)
				s.watches.wake(sb, true, "")
				break
			}
		}
	}
}

// apply updates st with e and wakes sb's Watches when e ends a tenure:
// a deletion of the key wakes the plain Watches and the turn Watches of
// the waiter whose mark was created first before it (every turn Watch
// when there is none); a put that shows another tenure than the one last
// seen, whose end went unseen, wakes every Watch.
//
// Every Locker must choose the same waiter for a release, so the choice
// is made from the marks as they were at the revision before it: the
// marks st has seen when its mark events have reached that revision, and
// otherwise, when a turn Watch is there to be chosen, the marks read at
// that revision (one read-only request), since the mark watch's events
// may still be on their way. A read that fails wakes every turn Watch: a
// wake-up more, never one missed.
func (s *store) apply(ctx context.Context, sb *sub, st *seen, e event) {
	ev := e.ev
	if e.mark {
		if ev.Type == mvccpb.DELETE {
			delete(st.marks, string(ev.Kv.Key))
		} else {
			st.marks[string(ev.Kv.Key)] = markSeen{waiter: markWaiter(string(ev.Kv.Key), sb.marks), created: ev.Kv.CreateRevision}
		}
		st.marksAt = max(st.marksAt, ev.Kv.ModRevision)
		return
	}
	switch {
	case ev.Type == mvccpb.DELETE:
		// The next Acquire need not read first.
		s.busy.free(sb.name)
		st.created = 0
		rev := ev.Kv.ModRevision
		marks := *st
		if st.marksAt < rev-1 && s.watches.hasTurn(sb) {
			var err error
			if marks, err = s.marksAt(ctx, sb.marks, rev-1); err != nil {
				s.watches.wake(sb, true, "")
				return
			}
		}
		waiter, ok := marks.choose(rev)
		s.watches.wake(sb, !ok, waiter)
	case ev.Kv.CreateRevision != st.created:
		if st.created != 0 {
			s.watches.wake(sb, true, "")
		}
		st.created = ev.Kv.CreateRevision
	}
}

// Stop implements lease.Watch: the Watch receives no more wake-ups. The
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
