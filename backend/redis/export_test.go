package redislease

import (
	"context"
	"time"

	"github.com/leasekit/lease/driver"
)

// SetWatchLimits sets how long l keeps a subscription without a Watch,
// and how many such subscriptions it keeps (0: maxLingering), in place of
// watchLinger and maxLingering. It must come before l's first Watch.
func SetWatchLimits(l *Locker, linger time.Duration, most int) {
	if linger <= 0 {
		linger = watchLinger
	}
	if most <= 0 {
		most = maxLingering
	}
	l.s.subs.SetLimits(linger, most, most*7/8)
}

// Lanes is how many requests of Acquire, Renew and Release l has on the
// wire at once before later calls queue for a pipeline.
func Lanes(l *Locker) int { return l.s.pipes.Lanes }

// Waiting returns how many calls of l wait in its queue for a pipeline.
func Waiting(l *Locker) int { return l.s.pipes.Waiting() }

// AcquireOrWait is the store's AcquireOrWait under l, with a Mark of the
// caller's choosing (l's own AcquireOrWait chooses the Mark itself).
func AcquireOrWait(ctx context.Context, l *Locker, name, owner string, ttl time.Duration, m driver.Mark) (driver.Tenure, error) {
	return l.s.AcquireOrWait(ctx, name, owner, ttl, m)
}

// StopWaiting is the store's StopWaiting under l, for any waiter ID.
func StopWaiting(ctx context.Context, l *Locker, name, waiter string) error {
	return l.s.StopWaiting(ctx, name, waiter)
}
