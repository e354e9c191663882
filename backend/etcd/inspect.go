package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/lease/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// inspectRetries is how many times Inspect reads a key again when its etcd
// lease vanished between reading the key and reading the lease (the
// tenure ended, or a Renew moved it onto a new lease).
const inspectRetries = 5

// errChanged reports a key whose etcd lease was gone when looked up.
var errChanged = errors.New("the tenure changed while being read")

// remaining asks etcd how long the lease id has left. etcd answers in
// whole seconds, truncated, so the true time left is within a second
// above the answer; remaining returns the middle of that second. ok is
// false if the lease no longer exists.
func (s *store) remaining(ctx context.Context, id clientv3.LeaseID) (d time.Duration, ok bool, err error) {
	r, err := s.client.TimeToLive(ctx, id)
	if err != nil {
		if isLeaseNotFound(err) {
			return 0, false, nil
		}
		return 0, false, err
	}
	if r.TTL < 0 {
		return 0, false, nil
	}
	return time.Duration(r.TTL)*time.Second + time.Second/2, true, nil
}

// describe returns the tenure that kv, a key of name, records, with its
// Expires from etcd's remaining time for its lease. It returns errChanged
// if the lease is gone.
func (s *store) describe(ctx context.Context, name string, kv *mvccpb.KeyValue) (driver.Tenure, error) {
	if kv.Lease == int64(clientv3.NoLease) {
		return driver.Tenure{}, fmt.Errorf("key %q has no etcd lease: another program writes under the prefix %q", kv.Key, s.prefix)
	}
	start := time.Now()
	rem, ok, err := s.remaining(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		return driver.Tenure{}, err
	}
	if !ok {
		return driver.Tenure{}, errChanged
	}
	return driver.Tenure{
		Name:      name,
		Owner:     string(kv.Value),
		Token:     uint64(kv.CreateRevision),
		Expires:   start.Add(rem).Round(0),
		Remaining: rem,
	}, nil
}

// Inspect implements driver.Store. It reads the key, then asks etcd how
// long its lease has left: Expires is approximate, to within half a
// second (see the package documentation).
func (s *store) Inspect(ctx context.Context, name string) (driver.Tenure, bool, error) {
	for range inspectRetries {
		r, err := s.client.Get(ctx, s.key(name))
		if err != nil {
			return driver.Tenure{}, false, err
		}
		if len(r.Kvs) == 0 {
			return driver.Tenure{}, false, nil
		}
		t, err := s.describe(ctx, name, r.Kvs[0])
		if errors.Is(err, errChanged) {
			continue
		}
		if err != nil {
			return driver.Tenure{}, false, err
		}
		return t, true, nil
	}
	return driver.Tenure{}, false, errChanged
}
