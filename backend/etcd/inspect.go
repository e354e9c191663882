package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// inspectRetries is how many times Inspect reads a key again when its etcd
// lease vanished between reading the key and reading the lease (the
// tenure ended, or a Renew moved it onto a new lease).
const inspectRetries = 5

// listWorkers bounds the concurrent lease look-ups of one List.
const listWorkers = 16

// errChanged reports a key whose etcd lease was gone when looked up.
var errChanged = errors.New("the tenure changed while being read")

// remaining asks etcd how long the lease id has left. etcd answers in
// whole seconds, truncated, so the true time left is within a second
// above the answer; remaining returns the middle of that second. ok is
// false if the lease no longer exists.
func (l *Locker) remaining(ctx context.Context, id clientv3.LeaseID) (d time.Duration, ok bool, err error) {
	r, err := l.client.TimeToLive(ctx, id)
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
func (l *Locker) describe(ctx context.Context, name string, kv *mvccpb.KeyValue) (lease.Lease, error) {
	if kv.Lease == int64(clientv3.NoLease) {
		return lease.Lease{}, fmt.Errorf("key %q has no etcd lease: another program writes under the prefix %q", kv.Key, l.prefix)
	}
	start := time.Now()
	rem, ok, err := l.remaining(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		return lease.Lease{}, err
	}
	if !ok {
		return lease.Lease{}, errChanged
	}
	return lease.Lease{
		Name:    name,
		Owner:   string(kv.Value),
		Token:   uint64(kv.CreateRevision),
		Expires: start.Add(rem).Round(0),
	}, nil
}

// inspect reads name's tenure; ok is false when there is none.
func (l *Locker) inspect(ctx context.Context, name string) (ls lease.Lease, ok bool, err error) {
	for range inspectRetries {
		r, err := l.client.Get(ctx, l.key(name))
		if err != nil {
			return lease.Lease{}, false, err
		}
		if len(r.Kvs) == 0 {
			return lease.Lease{}, false, nil
		}
		ls, err := l.describe(ctx, name, r.Kvs[0])
		if errors.Is(err, errChanged) {
			continue
		}
		if err != nil {
			return lease.Lease{}, false, err
		}
		return ls, true, nil
	}
	return lease.Lease{}, false, errChanged
}

// Inspect implements lease.Locker. It reads the key, then asks etcd how
// long its lease has left: Expires is approximate, to within half a
// second (see the package documentation).
func (l *Locker) Inspect(ctx context.Context, name string) (lease.Lease, error) {
	if err := lease.CheckName(name); err != nil {
		return lease.Lease{}, err
	}
	if err := l.begin("inspect", name); err != nil {
		return lease.Lease{}, err
	}
	ls, ok, err := l.inspect(ctx, name)
	if err != nil {
		return lease.Lease{}, fmt.Errorf("lease/etcd: inspect %q: %w", name, err)
	}
	if !ok {
		return lease.Lease{}, fmt.Errorf("lease/etcd: inspect %q: %w", name, lease.ErrNotHeld)
	}
	return ls, nil
}

// List implements lease.Lister. It reads every key under the prefix in one
// request, then each key's lease (up to 16 at a time), so it costs one
// round trip plus one per tenure.
func (l *Locker) List(ctx context.Context, prefix string) ([]lease.Lease, error) {
	if err := l.begin("list", prefix); err != nil {
		return nil, err
	}
	r, err := l.client.Get(ctx, l.key(prefix), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("lease/etcd: list %q: %w", prefix, err)
	}
	// etcd returns keys in byte order, which is name order.
	names := make([]string, len(r.Kvs))
	found := make([]lease.Lease, len(r.Kvs))
	held := make([]bool, len(r.Kvs))
	errs := make([]error, len(r.Kvs))
	sem := make(chan struct{}, listWorkers)
	var wg sync.WaitGroup
	for i, kv := range r.Kvs {
		name := string(kv.Key[len(l.prefix):])
		names[i] = name
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ls, err := l.describe(ctx, name, kv)
			if errors.Is(err, errChanged) {
				ls, held[i], errs[i] = l.inspect(ctx, name)
				found[i] = ls
				return
			}
			found[i], held[i], errs[i] = ls, err == nil, err
		}()
	}
	wg.Wait()
	out := make([]lease.Lease, 0, len(found))
	for i := range found {
		if errs[i] != nil {
			return nil, fmt.Errorf("lease/etcd: list %q: %q: %w", prefix, names[i], errs[i])
		}
		if held[i] {
			out = append(out, found[i])
		}
	}
	return out, nil
}

// ForceRelease implements lease.ForceReleaser. It deletes the key
// whoever holds it, reads how long its etcd lease had left (for the
// returned Lease's Expires), and revokes that lease: three round trips.
// The next tenure's create revision, its Token, is larger, as always.
func (l *Locker) ForceRelease(ctx context.Context, name string) (lease.Lease, error) {
	if err := lease.CheckName(name); err != nil {
		return lease.Lease{}, err
	}
	if err := l.begin("force release", name); err != nil {
		return lease.Lease{}, err
	}
	r, err := l.client.Delete(ctx, l.key(name), clientv3.WithPrevKV())
	if err != nil {
		return lease.Lease{}, fmt.Errorf("lease/etcd: force release %q: %w", name, err)
	}
	if len(r.PrevKvs) == 0 {
		return lease.Lease{}, fmt.Errorf("lease/etcd: force release %q: %w", name, lease.ErrNotHeld)
	}
	kv := r.PrevKvs[0]
	ended := lease.Lease{Name: name, Owner: string(kv.Value), Token: uint64(kv.CreateRevision), Expires: time.Now().Round(0)}
	if ls, err := l.describe(ctx, name, kv); err == nil {
		ended.Expires = ls.Expires
	}
	l.cleanup(ctx, clientv3.LeaseID(kv.Lease))
	return ended, nil
}
