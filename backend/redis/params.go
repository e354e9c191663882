package redislease

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
)

// redisParams are the go-redis options a URL may set; see the package
// documentation. They mean what they mean in redis.ParseURL.
var redisParams = []string{
	"protocol", "client_name", "max_retries", "dial_timeout", "read_timeout",
	"write_timeout", "pool_size", "pool_timeout", "min_idle_conns",
	"max_idle_conns", "conn_max_idle_time", "conn_max_lifetime", "skip_verify",
}

// applyParams sets o from the go-redis parameters in q. Each bad value is
// an error matching lease.ErrInvalid that names the parameter and value
// (none of them is a secret).
func applyParams(o *redis.Options, scheme string, q url.Values) error {
	for _, name := range redisParams {
		if !q.Has(name) {
			continue
		}
		v := q.Get(name)
		var err error
		switch name {
		case "protocol":
			o.Protocol, err = intParam(name, v, 2, 3)
		case "client_name":
			o.ClientName = v
		case "max_retries":
			o.MaxRetries, err = intParam(name, v, -1, 1000)
		case "pool_size":
			o.PoolSize, err = intParam(name, v, 0, 1<<20)
		case "min_idle_conns":
			o.MinIdleConns, err = intParam(name, v, 0, 1<<20)
		case "max_idle_conns":
			o.MaxIdleConns, err = intParam(name, v, 0, 1<<20)
		case "dial_timeout":
			o.DialTimeout, err = durationParam(name, v)
		case "read_timeout":
			o.ReadTimeout, err = durationParam(name, v)
		case "write_timeout":
			o.WriteTimeout, err = durationParam(name, v)
		case "pool_timeout":
			o.PoolTimeout, err = durationParam(name, v)
		case "conn_max_idle_time":
			o.ConnMaxIdleTime, err = durationParam(name, v)
		case "conn_max_lifetime":
			o.ConnMaxLifetime, err = durationParam(name, v)
		case "skip_verify":
			if o.TLSConfig == nil {
				return fmt.Errorf("%w: query parameter skip_verify applies to rediss:// URLs only, not %s://", lease.ErrInvalid, scheme)
			}
			o.TLSConfig.InsecureSkipVerify, err = boolParam(name, v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func parseInt(s string) (int, error) { return strconv.Atoi(s) }

func intParam(name, v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		if hi == lo+1 {
			return 0, fmt.Errorf("%w: query parameter %s=%q is not %d or %d", lease.ErrInvalid, name, v, lo, hi)
		}
		return 0, fmt.Errorf("%w: query parameter %s=%q is not an integer from %d to %d", lease.ErrInvalid, name, v, lo, hi)
	}
	return n, nil
}

// durationParam reads a duration as redis.ParseURL does: a Go duration
// ("3s", "500ms") or a whole number of seconds; zero or less turns the
// timeout off (-1 in go-redis's options). A context deadline still bounds
// every call, since Open's client follows them.
func durationParam(name, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.Atoi(v)
		if nerr != nil {
			return 0, fmt.Errorf("%w: query parameter %s=%q is not a duration (want e.g. 3s, 500ms, or -1 for none)", lease.ErrInvalid, name, v)
		}
		d = time.Duration(n) * time.Second
	}
	if d <= 0 {
		return -1, nil
	}
	return d, nil
}

func boolParam(name, v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: query parameter %s=%q is not true or false", lease.ErrInvalid, name, v)
	}
	return b, nil
}
