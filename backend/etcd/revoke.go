package etcdlease

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// cleanupTimeout bounds one revocation of an etcd lease that an operation
// left behind.
const cleanupTimeout = 2 * time.Second

// revoker revokes the etcd leases that operations no longer need, even if
// the operation's context is done. Errors are dropped: the lease expires
// by itself after its TTL.
type revoker struct {
	client *clientv3.Client
}

func (r *revoker) revoke(ctx context.Context, id clientv3.LeaseID) {
	if id == clientv3.NoLease {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, _ = r.client.Revoke(ctx, id)
}

func (r *revoker) close() {}
