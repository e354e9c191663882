package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/hub"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	_ driver.Watcher = (*Locker)(nil)
	_ driver.Watcher = (*store)(nil)
)

// watches is the etcd side of a Locker's Watches: the transport of its
// subscription hub (internal/hub), which keeps, per name, one
// subscription that every Watch of the name on this Locker shares, and
// lets it linger after its last Watch stopped, so that a Watch that
// stops and the next one on the same name cost no request. A
// subscription is an etcd watch on the name's key and one on its pass
// key (see turns.go), put on one clientv3.Watcher of the Locker's own
// (closed by Close, never the caller's client's) with a context carrying
// the same metadata (only WithRequireLeader's), so that clientv3
// multiplexes them all on one gRPC Watch stream, and followed by one
// goroutine, which wakes the name's Watches. watches counts those
// goroutines, so that Close can wait for them.
type watches struct {
	hub.Hub[subState]
	s  *store
	w  clientv3.Watcher // under the hub's lock; nil until the first Watch
	wg sync.WaitGroup
	// run reads the name's key, puts the subscription's etcd watches on
	// cw, says it is Ready and follows it until ctx ends (subscribe);
	// tests replace it.
	run func(ctx context.Context, cw clientv3.Watcher, sb *sub)
}

// subState is what a subscription to a name holds: its key, its pass
// key, the prefix of its marks (which the goroutine reads to choose a
// waiter), and the end of its goroutine.
type subState struct {
	key, pass, marks string
	cancel           context.CancelFunc
}

type (
	sub   = hub.Sub[subState]
	watch = hub.Watch[subState]
)

const (
	// lingerTime is how long a subscription stays after its last Watch
	// stopped, for the next Watch of the name to reuse.
	lingerTime = 30 * time.Second
	// maxLingering bounds the lingering subscriptions of a Locker; past
	// it, the one idle longest ends.
	maxLingering = 1024
	// watchSetup bounds the read of the key with which a new
	// subscription starts.
	watchSetup = 5 * time.Second
)

// init makes ws the transport of s's hub.
func (ws *watches) init(s *store) {
	ws.s, ws.run = s, s.subscribe
	ws.Init(ws, hub.Limits{Linger: lingerTime, MaxIdle: maxLingering, TrimTo: maxLingering, Setup: watchSetup,
		SetupFailed: func(name string) error {
			return fmt.Errorf("the watch of %s was not set up within %s", driver.Quote(name), watchSetup)
		}})
}

// Subscribe implements hub.Transport: it starts sb's goroutine, which
// reads the name's key and puts the etcd watches from the revision of
// that read.
func (ws *watches) Subscribe(sb *sub) {
	s := ws.s
	if ws.w == nil {
		ws.w = clientv3.NewWatcher(s.client)
	}
	// Every watch's context carries the same metadata, so that they share
	// one stream; WithRequireLeader makes a member cut off from its
	// cluster cancel the watch instead of going quiet.
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(s.life))
	sb.State = subState{key: s.key(sb.Key), pass: s.passKey(sb.Key), marks: s.marksPrefix(sb.Key), cancel: cancel}
	cw, run := ws.w, ws.run
	ws.wg.Add(1)
	go func() {
		defer ws.wg.Done()
		defer cancel()
		run(ctx, cw, sb)
	}()
}

// Unsubscribe implements hub.Transport: the subscriptions' goroutines
// end, and their etcd watches with them.
func (ws *watches) Unsubscribe(subs []*sub) {
	for _, sb := range subs {
		sb.State.cancel()
		sb.Forget()
	}
}

// close wakes the Watches and waits for the subscriptions' goroutines
// (the caller has ended the Locker's life context, which ends them), and
// closes the watch stream.
func (ws *watches) close() {
	ws.Close()
	ws.Lock()
	w := ws.w
	ws.Unlock()
	ws.wg.Wait()
	if w != nil {
		_ = w.Close()
	}
}

// wake wakes sb's Watches (see hub.Sub.Wake).
func (ws *watches) wake(sb *sub, plain, allTurns bool, waiter string) {
	ws.Lock()
	defer ws.Unlock()
	sb.Wake(plain, allTurns, waiter)
}

// hasTurn reports whether a turn Watch is on sb: only then does the
// choice of a release's waiter matter to it.
func (ws *watches) hasTurn(sb *sub) bool {
	ws.Lock()
	defer ws.Unlock()
	return sb.HasTurn()
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
	w, err := s.watches.Watch(ctx, name, turn, waiter)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// subscribe is a subscription's goroutine: it reads the name's key, puts
// the etcd watches on cw from the revision after that read, says the
// subscription is in place, and follows it until ctx ends. A read that
// fails fails the subscription, and the Watches waiting for it.
func (s *store) subscribe(ctx context.Context, cw clientv3.Watcher, sb *sub) {
	rctx, cancel := context.WithTimeout(ctx, watchSetup)
	created, rev, err := s.watchFrom(rctx, sb.State.key)
	cancel()
	if err != nil {
		s.watches.Lock()
		sb.Fail(err)
		s.watches.Unlock()
		return
	}
	chs, acancel := s.watchAgain(ctx, cw, sb, rev)
	s.watches.Lock()
	sb.Ready()
	s.watches.Unlock()
	s.follow(ctx, cw, sb, created, acancel, chs)
}

// watchBoth puts the etcd watches of sb on cw from revision rev+1: the
// name's key and its pass key (see turns.go).
func (s *store) watchBoth(ctx context.Context, cw clientv3.Watcher, sb *sub, rev int64) [2]clientv3.WatchChan {
	return [2]clientv3.WatchChan{
		cw.Watch(ctx, sb.State.key, clientv3.WithRev(rev+1)),
		cw.Watch(ctx, sb.State.pass, clientv3.WithRev(rev+1), clientv3.WithFilterDelete()),
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

// choiceGrace is how long a Locker with a turn Watch waits, after a
// deletion of the name's key, for the put of the pass key by which the
// releasing Locker names the waiter it chose (see nameChoice), before it
// reads the choice itself (chosen).
const choiceGrace = 300 * time.Millisecond

// maxChoices bounds the choices a subscription keeps that came before
// their deletion.
const maxChoices = 8

// choices are a subscription's releases whose choice it has not acted on
// yet: the deletions of the name's key seen before their choice (by the
// revision, when to read the choice instead), and the choices seen before
// their deletion. Only the subscription's goroutine uses them.
type choices struct {
	awaiting map[int64]time.Time
	named    map[int64]string
	timer    *time.Timer
	c        <-chan time.Time
}

// rearm sets the timer for the earliest deletion awaiting its choice.
func (c *choices) rearm() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer, c.c = nil, nil
	}
	var first time.Time
	for _, at := range c.awaiting {
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	if !first.IsZero() {
		c.timer = time.NewTimer(time.Until(first))
		c.c = c.timer.C
	}
}

// follow turns the events of chs, the etcd watches of sb's key and pass
// key (whose context acancel cancels), into wake-ups until ctx ends (the
// subscription went, or the Locker closed); it sets the watches up again
// whenever etcd cancels one. created is the create revision of the
// tenure the read before the watches found (0: none).
//
// Each event is judged on its own, by etcd's state at its revision (see
// apply), so the order in which the two watches' channels deliver their
// events does not matter.
func (s *store) follow(ctx context.Context, cw clientv3.Watcher, sb *sub, created int64, acancel context.CancelFunc, chs [2]clientv3.WatchChan) {
	defer func() { acancel() }()
	var ch choices
	defer func() {
		if ch.timer != nil {
			ch.timer.Stop()
		}
	}()
	backoff := time.Duration(0)
	for {
		var resp clientv3.WatchResponse
		var ok, pass bool
		select {
		case <-ctx.Done():
			return
		case <-ch.c:
			s.decideLate(ctx, sb, &ch)
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
				s.apply(ctx, sb, &created, &ch, ev, pass)
			}
			continue
		}
		// A watch ended with ctx still live: whatever happened between
		// its last event and the next read went unseen, so wake now and
		// again once the new watches are in place. A watch that keeps
		// ending before any event is set up again ever more slowly.
		acancel()
		ch.awaiting, ch.named = nil, nil
		ch.rearm()
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
			fresh, rev, err := s.watchFrom(ctx, sb.State.key)
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
// plain Watches at once, and the turn Watches of the waiter chosen at its
// revision: named by the releasing Locker's put of the pass key (before
// or after the deletion reaches this Locker), or, past choiceGrace
// without one, read (chosen). A put of the pass key by a StopWaiting that
// passed the turn on wakes the turn Watches that chosen names for its
// revision, and no plain Watch. A put of the key that shows another
// tenure than the one last seen, whose end went unseen, wakes every
// Watch. The choice is awaited or read only when a turn Watch is there to
// be chosen; a read that fails wakes every turn Watch: a wake-up more,
// never one missed.
func (s *store) apply(ctx context.Context, sb *sub, created *int64, ch *choices, ev *clientv3.Event, pass bool) {
	switch {
	case pass:
		if rev, waiter, ok := releaseChoice(ev.Kv.Value); ok {
			if _, awaited := ch.awaiting[rev]; awaited {
				delete(ch.awaiting, rev)
				ch.rearm()
				s.watches.wake(sb, false, false, waiter)
				return
			}
			if ch.named == nil {
				ch.named = map[int64]string{}
			}
			ch.named[rev] = waiter
			for len(ch.named) > maxChoices {
				delete(ch.named, minKey(ch.named))
			}
			return
		}
		if !s.watches.hasTurn(sb) {
			return
		}
		waiter, ok, err := s.chosen(ctx, sb.State.marks, ev.Kv.ModRevision)
		s.watches.wake(sb, false, err != nil || !ok, waiter)
	case ev.Type == mvccpb.DELETE:
		// The next Acquire need not read first.
		s.busy.free(sb.Key)
		*created = 0
		rev := ev.Kv.ModRevision
		waiter, named := ch.named[rev]
		delete(ch.named, rev)
		switch {
		case !s.watches.hasTurn(sb):
			s.watches.wake(sb, true, false, "")
		case named:
			s.watches.wake(sb, true, false, waiter)
		default:
			s.watches.wake(sb, true, false, "")
			if ch.awaiting == nil {
				ch.awaiting = map[int64]time.Time{}
			}
			ch.awaiting[rev] = time.Now().Add(choiceGrace)
			ch.rearm()
		}
	case ev.Kv.CreateRevision != *created:
		if *created != 0 {
			s.watches.wake(sb, true, true, "")
		}
		*created = ev.Kv.CreateRevision
	}
}

// decideLate reads the choice of the deletions whose grace for a named
// choice passed, and wakes the turn Watches it names.
func (s *store) decideLate(ctx context.Context, sb *sub, ch *choices) {
	now := time.Now()
	for rev, at := range ch.awaiting {
		if at.After(now) {
			continue
		}
		delete(ch.awaiting, rev)
		waiter, ok, err := s.chosen(ctx, sb.State.marks, rev)
		s.watches.wake(sb, false, err != nil || !ok, waiter)
	}
	ch.rearm()
}

// minKey is the smallest key of m.
func minKey(m map[int64]string) int64 {
	first := true
	var k int64
	for r := range m {
		if first || r < k {
			k, first = r, false
		}
	}
	return k
}
