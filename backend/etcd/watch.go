package etcdlease

import (
	"context"
	"fmt"
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
// which every Watch puts its etcd watch with a context carrying the same
// metadata (only WithRequireLeader's), so that clientv3 multiplexes them
// all on one gRPC Watch stream. It also counts the goroutines the
// Watches run, so that Close can wait for them.
type watches struct {
	mu     sync.Mutex
	w      clientv3.Watcher // nil until the first Watch
	closed bool
	wg     sync.WaitGroup
}

// start registers a Watch's goroutine and returns the Locker's
// clientv3.Watcher, made on first use, or ok false once the Locker has
// closed.
func (ws *watches) start(client *clientv3.Client) (w clientv3.Watcher, ok bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return nil, false
	}
	if ws.w == nil {
		ws.w = clientv3.NewWatcher(client)
	}
	ws.wg.Add(1)
	return ws.w, true
}

// close waits for the Watches' goroutines (the caller has ended the
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

// watch is one Watch on a name of an etcd Locker.
type watch struct {
	driver.Signal
	cancel    context.CancelFunc
	stopAfter func() bool
	done      chan struct{}
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
func (s *store) Watch(ctx context.Context, name string) (lease.Watch, error) {
	key := s.key(name)
	rev, created, err := s.watchFrom(ctx, key)
	if err != nil {
		return nil, err
	}
	cw, ok := s.watches.start(s.client)
	if !ok {
		return nil, lease.ErrClosed
	}
	wctx, cancel := context.WithCancel(s.life)
	w := &watch{Signal: driver.NewSignal(), cancel: cancel, done: make(chan struct{})}
	w.stopAfter = context.AfterFunc(ctx, cancel)
	// Every watch's context carries the same metadata, so that they share
	// one stream; WithRequireLeader makes a member cut off from its
	// cluster cancel the watch instead of going quiet.
	wctx = clientv3.WithRequireLeader(wctx)
	ch := cw.Watch(wctx, key, clientv3.WithRev(rev+1))
	go func() {
		defer s.watches.wg.Done()
		defer close(w.done)
		s.follow(wctx, cw, name, key, ch, created, w.Wake)
	}()
	return w, nil
}

// watchFrom reads key and returns the revision of the read and the key's
// create revision then (0 when absent).
func (s *store) watchFrom(ctx context.Context, key string) (rev, created int64, err error) {
	r, err := s.client.Get(ctx, key, clientv3.WithKeysOnly())
	if err != nil {
		return 0, 0, fmt.Errorf("read the key to watch: %w", err)
	}
	if len(r.Kvs) > 0 {
		created = r.Kvs[0].CreateRevision
	}
	return r.Header.Revision, created, nil
}

// watchRetry bounds the wait between attempts to set a cancelled watch up
// again.
const watchRetry = time.Second

// follow turns the events of ch, an etcd watch on key, into wake-ups
// until ctx ends, setting the watch up again whenever etcd cancels it.
// created is the create revision of the tenure last seen (0: none).
func (s *store) follow(ctx context.Context, cw clientv3.Watcher, name, key string, ch clientv3.WatchChan, created int64, wake func()) {
	backoff := time.Duration(0)
	for {
		resp, ok := <-ch
		if ctx.Err() != nil {
			return
		}
		if ok && !resp.Canceled && resp.Err() == nil && resp.CompactRevision == 0 {
			backoff = 0
			for _, ev := range resp.Events {
				switch {
				case ev.Type == mvccpb.DELETE:
					// The next Acquire need not read first.
					s.known.free(name)
					created = 0
					wake()
				case ev.Kv.CreateRevision != created:
					if created != 0 {
						wake()
					}
					created = ev.Kv.CreateRevision
				}
			}
			continue
		}
		// The watch ended with ctx still live: whatever happened between
		// its last event and the next read went unseen, so wake now and
		// again once the new watch is in place. A watch that keeps ending
		// before any event is set up again ever more slowly.
		wake()
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
			rev, c, err := s.watchFrom(ctx, key)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				created = c
				ch = cw.Watch(ctx, key, clientv3.WithRev(rev+1))
				wake()
				break
			}
		}
	}
}

// Stop implements lease.Watch: it cancels the etcd watch and waits for the
// goroutine that followed it.
func (w *watch) Stop() {
	w.stopAfter()
	w.cancel()
	<-w.done
}
