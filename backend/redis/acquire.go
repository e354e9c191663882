package redislease

import (
	"context"
	"fmt"
	"time"

	"github.com/leasekit/lease"
)

// Acquire implements lease.Locker with one run of acquire.lua.
//
// The token of a new tenure is one more than the name's counter but never
// less than the server's TIME in microseconds, so tokens keep growing even
// after the counter is lost. Expires is the server's TIME plus ttl
// (rounded up to a whole millisecond). A failure of the request itself
// (connection, timeout, READONLY replica, script error) is returned
// wrapped and matches none of the lease sentinels; retrying with the same
// owner is safe, since a re-entrant Acquire keeps the token.
func (l *Locker) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	if err := lease.CheckAcquire(name, owner, ttl); err != nil {
		return lease.Lease{}, err
	}
	if err := l.begin(ctx); err != nil {
		return lease.Lease{}, fmt.Errorf("lease/redis: acquire %q: %w", name, err)
	}
	leaseKey, tokenKey := l.keys(name)
	ms := ttlMillis(ttl)
	start := time.Now()
	v, err := acquireScript.Run(ctx, l.client, []string{leaseKey, tokenKey}, name, owner, ms).Result()
	if err != nil {
		return lease.Lease{}, fmt.Errorf("lease/redis: acquire %q: %w", name, err)
	}
	got, err := parseAcquire(v, name, owner, ms, start, ttl)
	if err != nil {
		return lease.Lease{}, fmt.Errorf("lease/redis: acquire %q: %w", name, err)
	}
	return got, nil
}

// parseAcquire turns acquire.lua's reply into a Lease or a *HeldError.
func parseAcquire(v interface{}, name, owner string, ms int64, start time.Time, ttl time.Duration) (lease.Lease, error) {
	r, err := asReply(v, 4)
	if err != nil {
		return lease.Lease{}, err
	}
	granted, err := r.int(0)
	if err != nil {
		return lease.Lease{}, err
	}
	if granted == 0 {
		if len(r) < 5 {
			return lease.Lease{}, fmt.Errorf("unexpected script reply %#v", v)
		}
		holder, err := r.str(1)
		if err != nil {
			return lease.Lease{}, err
		}
		left, err := r.remaining(2)
		if err != nil {
			return lease.Lease{}, err
		}
		return lease.Lease{}, &lease.HeldError{Name: name, Owner: holder, Remaining: left}
	}
	token, err := r.token(1)
	if err != nil {
		return lease.Lease{}, err
	}
	now, err := r.time(2)
	if err != nil {
		return lease.Lease{}, err
	}
	return lease.Lease{
		Name:     name,
		Owner:    owner,
		Token:    token,
		Expires:  now.Add(time.Duration(ms) * time.Millisecond),
		Deadline: lease.DeadlineFrom(start, ttl),
	}, nil
}
