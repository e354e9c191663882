package semaphore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// counting is a Locker that counts the calls that reach the store behind
// it: on every backend of this module each is one request (Acquire of a
// free name is one round trip; see each backend's documentation for the
// few calls that take two).
type counting struct {
	lease.Locker
	acquires, renews, releases, inspects atomic.Int64
}

func (c *counting) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	c.acquires.Add(1)
	return c.Locker.Acquire(ctx, name, owner, ttl)
}

func (c *counting) Renew(ctx context.Context, l lease.Lease, ttl time.Duration) (lease.Lease, error) {
	c.renews.Add(1)
	return c.Locker.Renew(ctx, l, ttl)
}

func (c *counting) Release(ctx context.Context, l lease.Lease) error {
	c.releases.Add(1)
	return c.Locker.Release(ctx, l)
}

func (c *counting) Inspect(ctx context.Context, name string) (lease.Lease, error) {
	c.inspects.Add(1)
	return c.Locker.Inspect(ctx, name)
}

// Watch passes a watch on to the Locker behind, when it can watch.
func (c *counting) Watch(ctx context.Context, name string) (driver.Watch, error) {
	if w, ok := c.Locker.(driver.Watcher); ok {
		return w.Watch(ctx, name)
	}
	return nil, errors.ErrUnsupported
}

func (c *counting) total() int64 {
	return c.acquires.Load() + c.renews.Load() + c.releases.Load() + c.inspects.Load()
}
