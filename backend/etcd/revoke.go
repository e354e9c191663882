package etcdlease

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// cleanupTimeout bounds one revocation of an etcd lease that an operation
// left behind.
const cleanupTimeout = 2 * time.Second

// revoker revokes, in the background, the etcd leases that operations no
// longer need: the lease a Release, ForceRelease, re-entrant Acquire or
// Renew moved the key off, and the lease a refused Acquire or Renew
// granted. An operation returns as soon as etcd has told it the outcome,
// so a cluster that stops answering after that answer cannot hold the
// call past its context; the revocation runs on, bounded by
// cleanupTimeout, and the Locker's Close waits for it, so nothing outlives
// the Locker. A revocation that fails leaves the etcd lease to expire by
// itself after its TTL, holding no key.
type revoker struct {
	client *clientv3.Client

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// revoke starts revoking id, keeping ctx's values but not its deadline or
// cancellation (the call that asks has returned, or is about to). After
// close it does nothing: the lease expires by itself.
func (r *revoker) revoke(ctx context.Context, id clientv3.LeaseID) {
	if id == clientv3.NoLease {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		// A lease that is already gone is no error, and any other error
		// leaves the lease to expire: nobody is waiting for the answer.
		_, _ = r.client.Revoke(ctx, id)
	}()
}

// close waits for the revocations under way and makes later ones no-ops.
func (r *revoker) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait()
}
