package redislease

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/leasekit/lease"
)

// Renew implements lease.Locker with one run of renew.lua: it extends l to
// the server's now+ttl when the name still holds l's owner and token, and
// otherwise returns an error matching lease.ErrLost, changing nothing.
func (l *Locker) Renew(ctx context.Context, ls lease.Lease, ttl time.Duration) (lease.Lease, error) {
	if err := lease.CheckRenew(ls, ttl); err != nil {
		return lease.Lease{}, err
	}
	if err := l.begin(ctx); err != nil {
		return lease.Lease{}, fmt.Errorf("lease/redis: renew %q: %w", ls.Name, err)
	}
	leaseKey, _ := l.keys(ls.Name)
	ms := ttlMillis(ttl)
	start := time.Now()
	v, err := renewScript.Run(ctx, l.client, []string{leaseKey}, ls.Name, ls.Owner, strconv.FormatUint(ls.Token, 10), ms).Result()
	if err != nil {
		return lease.Lease{}, fmt.Errorf("lease/redis: renew %q: %w", ls.Name, err)
	}
	r, err := asReply(v, 1)
	if err != nil {
		return lease.Lease{}, fmt.Errorf("lease/redis: renew %q: %w", ls.Name, err)
	}
	ok, err := r.int(0)
	if err == nil && ok == 1 && len(r) < 3 {
		err = fmt.Errorf("unexpected script reply %#v", v)
	}
	if err != nil {
		return lease.Lease{}, fmt.Errorf("lease/redis: renew %q: %w", ls.Name, err)
	}
	if ok != 1 {
		return lease.Lease{}, fmt.Errorf("lease/redis: renew %q token %d: %w", ls.Name, ls.Token, lease.ErrLost)
	}
	now, err := r.time(1)
	if err != nil {
		return lease.Lease{}, fmt.Errorf("lease/redis: renew %q: %w", ls.Name, err)
	}
	ls.Expires = now.Add(time.Duration(ms) * time.Millisecond)
	ls.Deadline = lease.DeadlineFrom(start, ttl)
	return ls, nil
}

// Release implements lease.Locker with one run of release.lua: it deletes
// the lease key when it still holds l's owner and token, and otherwise
// returns an error matching lease.ErrLost, changing nothing. The token
// counter stays, so the next tenure gets a larger token.
//
// go-redis resends a command whose connection failed or timed out (up to
// Options.MaxRetries times). When the first attempt of a Release did reach
// Redis, the resent one finds the tenure gone and reports ErrLost although
// this caller released it; Acquire and Renew are safe to resend.
func (l *Locker) Release(ctx context.Context, ls lease.Lease) error {
	if err := lease.CheckLease(ls); err != nil {
		return err
	}
	if err := l.begin(ctx); err != nil {
		return fmt.Errorf("lease/redis: release %q: %w", ls.Name, err)
	}
	leaseKey, _ := l.keys(ls.Name)
	n, err := releaseScript.Run(ctx, l.client, []string{leaseKey}, ls.Name, ls.Owner, strconv.FormatUint(ls.Token, 10)).Int64()
	if err != nil {
		return fmt.Errorf("lease/redis: release %q: %w", ls.Name, err)
	}
	if n != 1 {
		return fmt.Errorf("lease/redis: release %q token %d: %w", ls.Name, ls.Token, lease.ErrLost)
	}
	return nil
}
