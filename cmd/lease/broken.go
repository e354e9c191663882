//go:build leasebroken

package main

// This file gives the CLI tests a store that breaks the lease contract, so
// they can see "lease check" fail (broken://), and one that fails every
// call (broken://?down=1), so they can see it unable to test a store. It is compiled only with the leasebroken
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
		q, err := driver.URLQuery(u, "down")
		if err != nil {
			return nil, err
		}
		if q.Get("down") != "" {
			return driver.NewLocker("broken", downStore{}), nil
		}
		return &brokenLocker{Locker: shared}, nil
	})
}

// errDown is the failure of every call to broken://?down=1.
var errDown = errors.New("broken: connection refused")

// downStore, behind broken://?down=1, fails every call as a store that
// went away would: with an error that is no lease outcome (bad input is
// still refused first, by driver.Locker). It breaks no promise; lease check
// cannot test it.
type downStore struct{}

func (downStore) Acquire(context.Context, string, string, time.Duration) (driver.Tenure, error) {
	return driver.Tenure{}, errDown
}

func (downStore) Renew(context.Context, driver.Tenure, time.Duration) (driver.Tenure, bool, error) {
	return driver.Tenure{}, false, errDown
}

func (downStore) Release(context.Context, driver.Tenure) (bool, error) { return false, errDown }

func (downStore) Inspect(context.Context, string) (driver.Tenure, bool, error) {
	return driver.Tenure{}, false, errDown
}

func (downStore) Close() error { return nil }

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
