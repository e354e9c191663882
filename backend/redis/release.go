package redislease

import (
	"context"
	"strconv"

	"github.com/leasekit/lease/driver"
)

// Release implements driver.Store with one run of release.lua: it deletes
// the lease key when it still holds t's owner and token and reports ok;
// otherwise it changes nothing and reports ok false. The token counter
// stays, so the next tenure gets a larger token.
//
// go-redis resends a command whose connection failed or timed out (up to
// Options.MaxRetries times). When the first attempt of a Release did reach
// Redis, the resent one finds the tenure gone and reports ok false,
// although this caller released it; Acquire and Renew are safe to resend.
func (s *store) Release(ctx context.Context, t driver.Tenure) (bool, error) {
	leaseKey, _ := s.keys(t.Name)
	n, err := releaseScript.Run(ctx, s.client, []string{leaseKey}, t.Name, t.Owner, strconv.FormatUint(t.Token, 10)).Int64()
	if err != nil {
		return false, callErr(ctx, err)
	}
	return n == 1, nil
}
