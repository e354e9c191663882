package redislease

import (
	"context"
	"fmt"
	"time"

	"github.com/leasekit/lease/driver"
)

// Acquire implements driver.Store with one run of acquire.lua.
//
// The token of a new tenure is the server's TIME in microseconds, or one
// more than the name's last token (kept in its token key until the clock
// has passed it by tokenMemory) when that is not below the clock, so
// tokens keep growing even after the key is lost (see "Tokens" in the
// package documentation). Acquired is the server's TIME when the tenure
// began, kept in the lease hash (zero for a tenure begun by a version that
// did not record it). Expires is the server's TIME plus ttl
// (rounded up to a whole millisecond). A failure of the request itself
// (connection, timeout, READONLY replica, script error) is returned as an
// error; retrying with the same owner is safe, since a re-entrant Acquire
// keeps the token (and go-redis's own resends rely on that).
func (s *store) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (driver.Tenure, error) {
	leaseKey, tokenKey := s.keys(name)
	ms := ttlMillis(ttl)
	v, err := s.call(ctx, acquireScript, true, []string{leaseKey, tokenKey}, name, owner, ms)
	if err != nil {
		return driver.Tenure{}, callErr(ctx, err)
	}
	return parseAcquire(v, owner, ms)
}

// parseAcquire turns acquire.lua's reply into the caller's tenure or the
// holder's: {1, token, time_s, time_us, acquired_us} or {0, holder,
// pttl_ms, time_s, time_us}.
func parseAcquire(v interface{}, owner string, ms int64) (driver.Tenure, error) {
	r, err := asReply(v, 4)
	if err != nil {
		return driver.Tenure{}, err
	}
	granted, err := r.int(0)
	if err != nil {
		return driver.Tenure{}, err
	}
	if granted == 0 {
		if len(r) < 5 {
			return driver.Tenure{}, fmt.Errorf("unexpected script reply %#v", v)
		}
		holder, err := r.str(1)
		if err != nil {
			return driver.Tenure{}, err
		}
		left, err := r.remaining(2)
		if err != nil {
			return driver.Tenure{}, err
		}
		now, err := r.time(3)
		if err != nil {
			return driver.Tenure{}, err
		}
		return driver.Tenure{Owner: holder, Expires: now.Add(left), Remaining: left}, nil
	}
	token, err := r.token(1)
	if err != nil {
		return driver.Tenure{}, err
	}
	now, err := r.time(2)
	if err != nil {
		return driver.Tenure{}, err
	}
	acquired, err := r.acquired(4)
	if err != nil {
		return driver.Tenure{}, err
	}
	d := time.Duration(ms) * time.Millisecond
	return driver.Tenure{Owner: owner, Token: token, Expires: now.Add(d), Acquired: acquired, Remaining: d}, nil
}
