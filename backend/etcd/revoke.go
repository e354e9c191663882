package etcdlease

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// cleanupTimeout bounds one revocation of an etcd lease that an operation
// left behind, and one grant that refills the lease pool.
const cleanupTimeout = 2 * time.Second

// revokeWorkers bounds the revocations under way at once, so that ten
// thousand Releases in a burst do not become ten thousand concurrent
// LeaseRevokes (each a raft write) that etcd answers with "too many
// requests".
const revokeWorkers = 16

// revoker revokes, in the background, the etcd leases that operations no
// longer need: a tenure's lease once the ledger allows it (a Release, a
// ForceRelease, a move off it, an Acquire that put nothing on it), a
// spare lease of the pool that went stale, and leases of waiting marks.
// An operation returns as
// soon as etcd has told it the outcome, so a cluster that stops answering
// after that answer cannot hold the call past its context; the revocation
// runs on, bounded by cleanupTimeout, and the Locker's Close waits for
// them (for the queued ones, at most cleanupTimeout in all), so nothing
// outlives the Locker. A revocation that fails or never starts leaves the
// etcd lease to expire by itself after its TTL, holding no key: the
// ledger allows a tenure's lease to be revoked only once no write of this
// Locker can put a tenure on it and every tenure on it is gone, and from
// then on lets nothing keep it alive or adopt a tenure on it.
type revoker struct {
	client *clientv3.Client

	mu      sync.Mutex
	closed  bool
	drainBy time.Time // after close: queued revocations not started by then are dropped
	queue   []revocation
	workers int
	wg      sync.WaitGroup
}

type revocation struct {
	ctx context.Context
	id  clientv3.LeaseID
}

// revoke queues the revocation of id, keeping ctx's values but not its
// deadline or cancellation (the call that asks has returned, or is about
// to). After close it does nothing: the lease expires by itself.
func (r *revoker) revoke(ctx context.Context, id clientv3.LeaseID) {
	if id == clientv3.NoLease {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.queue = append(r.queue, revocation{ctx: context.WithoutCancel(ctx), id: id})
	if r.workers < revokeWorkers {
		r.workers++
		r.wg.Add(1)
		go r.work()
	}
}

func (r *revoker) work() {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		if len(r.queue) == 0 || (r.closed && time.Now().After(r.drainBy)) {
			r.workers--
			r.mu.Unlock()
			return
		}
		next := r.queue[0]
		r.queue[0] = revocation{}
		r.queue = r.queue[1:]
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(next.ctx, cleanupTimeout)
		// A lease that is already gone is no error, and any other error
		// leaves the lease to expire: nobody is waiting for the answer.
		_, _ = r.client.Revoke(ctx, next.id)
		cancel()
	}
}

// idle waits until the queue is empty and no revocation is under way.
func (r *revoker) idle() { r.wg.Wait() }

// close makes later revocations no-ops and waits for the queued ones,
// dropping those not started within cleanupTimeout.
func (r *revoker) close() {
	r.mu.Lock()
	r.closed = true
	r.drainBy = time.Now().Add(cleanupTimeout)
	r.mu.Unlock()
	r.wg.Wait()
	r.mu.Lock()
	r.queue = nil
	r.mu.Unlock()
}
