//go:build leasebroken

package main

// This file gives the CLI tests a store that breaks the lease contract, so
// they can see "lease check" fail. It is compiled only with the leasebroken
// build tag: "broken://" is never in a real lease binary.

import (
	"context"
	"errors"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/driver"
)

func init() {
	shared := memory.New()
	lease.Register("broken", func(ctx context.Context, u *url.URL) (lease.Locker, error) {
		if _, err := driver.URLQuery(u); err != nil {
			return nil, err
		}
		return &brokenLocker{Locker: shared}, nil
	})
}

// brokenLocker is one process-wide memory store whose Acquire takes a held
// lease away from its holder: two owners then hold one lease.
type brokenLocker struct {
	*memory.Locker
	closed atomic.Bool
}

func (b *brokenLocker) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	if b.closed.Load() {
		return lease.Lease{}, lease.ErrClosed
	}
	l, err := b.Locker.Acquire(ctx, name, owner, ttl)
	if errors.Is(err, lease.ErrHeld) {
		_, _ = b.Locker.ForceRelease(ctx, name)
		return b.Locker.Acquire(ctx, name, owner, ttl)
	}
	return l, err
}

func (b *brokenLocker) Close() error {
	b.closed.Store(true)
	return nil
}
