package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// etcdImpls are etcd's peers: concurrency.Mutex, and for renewal the
// keep-alive of a lease granted in advance.
func etcdImpls(c *storeConn, ttl time.Duration) []impl {
	return []impl{mutexImpl(c, ttl), keepAliveOnceImpl(c, ttl), keepAliveStreamImpl(c, ttl)}
}

// ttlSeconds is ttl in whole seconds, rounded up, as etcd grants it.
func ttlSeconds(ttl time.Duration) int64 { return int64((ttl + time.Second - 1) / time.Second) }

// mutexImpl is concurrency.Mutex, each handle on its own Session (a lease
// granted once and kept alive on a stream while the handle lives).
func mutexImpl(c *storeConn, ttl time.Duration) impl {
	pfx := c.etcdPrefix() + "mutex/"
	return impl{
		name:   "concurrency.Mutex (on a Session)",
		fenced: true,
		does: map[string]string{
			"cycle": "Lock (Txn: put its key on the session's lease if absent, range the first creator) + Unlock (DeleteRange): 2 raft writes",
			"busy":  "TryLock (Txn that puts its key, then DeleteRange of it: 2 raft writes)",
		},
		open: func(ctx context.Context, name string) (*handle, error) {
			s, err := concurrency.NewSession(c.etcd, concurrency.WithTTL(int(ttlSeconds(ttl))), concurrency.WithContext(context.WithoutCancel(ctx)))
			if err != nil {
				return nil, err
			}
			m := concurrency.NewMutex(s, pfx+name)
			return &handle{
				try: func(ctx context.Context) (int64, bool, error) {
					err := m.TryLock(ctx)
					switch {
					case errors.Is(err, concurrency.ErrLocked):
						return 0, false, nil
					case err != nil:
						return 0, false, err
					}
					// The key's create revision: it grows with each tenure.
					return m.Header().Revision, true, nil
				},
				release: func(ctx context.Context) error { return m.Unlock(ctx) },
				close:   func() { _ = s.Close() },
			}, nil
		},
	}
}

// grant grants the etcd lease that a keep-alive handle renews.
func grant(ctx context.Context, c *storeConn, ttl time.Duration) (clientv3.LeaseID, error) {
	g, err := c.etcd.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return 0, err
	}
	return g.ID, nil
}

// keepAliveOnceImpl renews a lease granted in advance with
// clientv3's KeepAliveOnce, which opens a keep-alive stream per call.
func keepAliveOnceImpl(c *storeConn, ttl time.Duration) impl {
	return impl{
		name: "KeepAliveOnce (granted lease)",
		does: map[string]string{"renew": "KeepAliveOnce: a new LeaseKeepAlive stream, one request and its reply"},
		open: func(ctx context.Context, name string) (*handle, error) {
			var id clientv3.LeaseID
			return &handle{
				try: func(ctx context.Context) (int64, bool, error) {
					var err error
					id, err = grant(ctx, c, ttl)
					return 0, err == nil, err
				},
				release: func(ctx context.Context) error { _, err := c.etcd.Revoke(ctx, id); return err },
				renew: func(ctx context.Context) error {
					r, err := c.etcd.KeepAliveOnce(ctx, id)
					if err == nil && r.TTL <= 0 {
						err = errors.New("the lease expired")
					}
					return err
				},
			}, nil
		},
	}
}

// keepAliveStreamImpl renews a lease granted in advance with one
// request and reply on a LeaseKeepAlive stream it keeps open: the least
// an etcd renewal can cost.
func keepAliveStreamImpl(c *storeConn, ttl time.Duration) impl {
	return impl{
		name: "keep-alive on an open stream (granted lease)",
		does: map[string]string{"renew": "one LeaseKeepAliveRequest and its reply on a stream opened in advance"},
		open: func(ctx context.Context, name string) (*handle, error) {
			var (
				id     clientv3.LeaseID
				stream pb.Lease_LeaseKeepAliveClient
				cancel context.CancelFunc = func() {}
				once   sync.Once
			)
			return &handle{
				try: func(ctx context.Context) (int64, bool, error) {
					var err error
					if id, err = grant(ctx, c, ttl); err != nil {
						return 0, false, err
					}
					sctx, scancel := context.WithCancel(context.WithoutCancel(ctx))
					stream, err = pb.NewLeaseClient(c.etcd.ActiveConnection()).LeaseKeepAlive(sctx)
					if err != nil {
						scancel()
						return 0, false, err
					}
					cancel = scancel
					return 0, true, nil
				},
				release: func(ctx context.Context) error {
					once.Do(cancel)
					_, err := c.etcd.Revoke(ctx, id)
					return err
				},
				renew: func(ctx context.Context) error {
					if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)}); err != nil {
						return err
					}
					r, err := stream.Recv()
					if err == nil && r.TTL <= 0 {
						err = fmt.Errorf("the lease expired")
					}
					return err
				},
				close: func() { once.Do(cancel) },
			}, nil
		},
	}
}
