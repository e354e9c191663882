package redislease

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/leasekit/lease/driver"
)

// Renew implements driver.Store with one run of renew.lua: it extends t
// to the server's now+ttl when the name still holds t's owner and token,
// and otherwise changes nothing and reports ok false. A resent Renew (go-
// redis retries a request whose connection failed) extends the tenure
// again, which is what the caller asked for.
func (s *store) Renew(ctx context.Context, t driver.Tenure, ttl time.Duration) (driver.Tenure, bool, error) {
	leaseKey := s.leaseKey(t.Name)
	ms := ttlMillis(ttl)
	v, err := s.call(ctx, renewScript, true, []string{leaseKey}, t.Name, t.Owner, strconv.FormatUint(t.Token, 10), ms)
	if err != nil {
		return driver.Tenure{}, false, callErr(ctx, err)
	}
	return renewReply(v, t.Name, ms)
}

// renewReply reads renew.lua's reply v for the tenure of name renewed for
// ms milliseconds: the renewed tenure, or ok false when it was lost.
func renewReply(v any, name string, ms int64) (driver.Tenure, bool, error) {
	r, err := asReply(v, 1)
	if err != nil {
		return driver.Tenure{}, false, err
	}
	ok, err := r.int(0)
	if err != nil {
		return driver.Tenure{}, false, err
	}
	if ok != 1 {
		return driver.Tenure{}, false, nil
	}
	if len(r) < 3 {
		return driver.Tenure{}, false, fmt.Errorf("unexpected script reply %#v", v)
	}
	now, err := r.time(1)
	if err != nil {
		return driver.Tenure{}, false, err
	}
	acquired, err := r.acquired(3)
	if err != nil {
		return driver.Tenure{}, false, err
	}
	d := time.Duration(ms) * time.Millisecond
	return driver.Tenure{Name: name, Expires: now.Add(d), Acquired: acquired, Remaining: d}, true, nil
}
