package redislease

import (
	"context"
	"fmt"

	"github.com/leasekit/lease"
)

// Inspect implements lease.Locker with one run of inspect.lua. Expires is
// the server's TIME plus the lease key's PTTL.
func (l *Locker) Inspect(ctx context.Context, name string) (lease.Lease, error) {
	if err := lease.CheckName(name); err != nil {
		return lease.Lease{}, err
	}
	if err := l.begin(ctx); err != nil {
		return lease.Lease{}, fmt.Errorf("lease/redis: inspect %q: %w", name, err)
	}
	leaseKey, _ := l.keys(name)
	v, err := inspectScript.Run(ctx, l.client, []string{leaseKey}, name).Result()
	if err != nil {
		return lease.Lease{}, fmt.Errorf("lease/redis: inspect %q: %w", name, err)
	}
	got, held, err := parseTenure(v)
	if err != nil {
		return lease.Lease{}, fmt.Errorf("lease/redis: inspect %q: %w", name, err)
	}
	if !held {
		return lease.Lease{}, fmt.Errorf("lease/redis: inspect %q: %w", name, lease.ErrNotHeld)
	}
	return got, nil
}

// ForceRelease implements lease.ForceReleaser with one run of
// force_release.lua: it deletes the current tenure of name, whoever holds
// it, and returns it; lease.ErrNotHeld when there is none. The token
// counter stays, so the next tenure gets a larger token.
func (l *Locker) ForceRelease(ctx context.Context, name string) (lease.Lease, error) {
	if err := lease.CheckName(name); err != nil {
		return lease.Lease{}, err
	}
	if err := l.begin(ctx); err != nil {
		return lease.Lease{}, fmt.Errorf("lease/redis: force release %q: %w", name, err)
	}
	leaseKey, _ := l.keys(name)
	v, err := forceReleaseScript.Run(ctx, l.client, []string{leaseKey}, name).Result()
	if err != nil {
		return lease.Lease{}, fmt.Errorf("lease/redis: force release %q: %w", name, err)
	}
	got, held, err := parseTenure(v)
	if err != nil {
		return lease.Lease{}, fmt.Errorf("lease/redis: force release %q: %w", name, err)
	}
	if !held {
		return lease.Lease{}, fmt.Errorf("lease/redis: force release %q: %w", name, lease.ErrNotHeld)
	}
	return got, nil
}

// parseTenure parses the reply of inspect.lua or force_release.lua: {0}
// for no tenure, or {1, name, owner, token, pttl, time_s, time_us}.
func parseTenure(v interface{}) (lease.Lease, bool, error) {
	r, err := asReply(v, 1)
	if err != nil {
		return lease.Lease{}, false, err
	}
	held, err := r.int(0)
	if err != nil {
		return lease.Lease{}, false, err
	}
	if held == 0 {
		return lease.Lease{}, false, nil
	}
	if len(r) < 7 {
		return lease.Lease{}, false, fmt.Errorf("unexpected script reply %#v", v)
	}
	got, err := r.tenure()
	return got, err == nil, err
}
