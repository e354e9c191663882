package redislease

import (
	"context"
	"fmt"

	"github.com/leasekit/lease/driver"
)

// Inspect implements driver.Store with one run of inspect.lua. Expires is
// the server's TIME plus the lease key's PTTL.
func (s *store) Inspect(ctx context.Context, name string) (driver.Tenure, bool, error) {
	leaseKey := s.leaseKey(name)
	v, err := inspectScript.Run(ctx, s.client, []string{leaseKey}, name).Result()
	if err != nil {
		return driver.Tenure{}, false, callErr(ctx, err)
	}
	return parseTenure(v)
}

// ForceRelease implements driver.ForceReleaser with one run of
// force_release.lua: it deletes the current tenure of name, whoever holds
// it, and returns it, or reports ok false when there is none. The name's
// token key is left alone, so the next tenure gets a larger token. Like
// Release, it names the waiter whose turn it is in the message it
// publishes.
func (s *store) ForceRelease(ctx context.Context, name string) (driver.Tenure, bool, error) {
	tag := tagOf(name)
	keys := []string{s.key(&tag, leaseSuffix, ""), s.key(&tag, marksSuffix, ""), s.key(&tag, lapsesSuffix, "")}
	v, err := forceReleaseScript.Run(ctx, s.client, keys, name).Result()
	if err != nil {
		return driver.Tenure{}, false, callErr(ctx, err)
	}
	return parseTenure(v)
}

// parseTenure parses the reply of inspect.lua or force_release.lua: {0}
// for no tenure, or {1, name, owner, token, pttl, time_s, time_us}.
func parseTenure(v interface{}) (driver.Tenure, bool, error) {
	r, err := asReply(v, 1)
	if err != nil {
		return driver.Tenure{}, false, err
	}
	held, err := r.int(0)
	if err != nil {
		return driver.Tenure{}, false, err
	}
	if held == 0 {
		return driver.Tenure{}, false, nil
	}
	if len(r) < 7 {
		return driver.Tenure{}, false, fmt.Errorf("unexpected script reply %#v", v)
	}
	got, err := r.tenure()
	if err != nil {
		return driver.Tenure{}, false, err
	}
	return got, true, nil
}
