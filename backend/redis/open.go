package redislease

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/leasekit/lease"
	"github.com/redis/go-redis/v9"
)

func init() {
	opener := func(ctx context.Context, u *url.URL) (lease.Locker, error) {
		return Open(ctx, u.String())
	}
	lease.Register("redis", opener)
	lease.Register("rediss", opener)
}

// redisParams are the go-redis options that Open passes through to
// redis.ParseURL; see the package documentation.
var redisParams = []string{
	"protocol", "client_name", "max_retries", "dial_timeout", "read_timeout",
	"write_timeout", "pool_size", "pool_timeout", "min_idle_conns",
	"max_idle_conns", "conn_max_idle_time", "conn_max_lifetime", "skip_verify",
}

// Open connects to the single Redis server of a redis:// or rediss:// (TLS)
// URL, such as redis://user:password@host:6379/0?prefix=myapp:lease:, and
// returns a Locker that owns the client: its Close closes the connections.
// The query parameters are listed in the package documentation; an unknown
// one is an error matching lease.ErrInvalid, as is a prefix with braces.
// Open loads the scripts into the server's script cache, so it fails early
// when the server cannot be reached, and the first operations take one
// round trip each. opts apply after the URL's parameters.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Locker, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: lease/redis: URL: %v", lease.ErrInvalid, err)
	}
	if s := strings.ToLower(u.Scheme); s != "redis" && s != "rediss" {
		return nil, fmt.Errorf("%w: lease/redis: URL scheme %q is not redis or rediss", lease.ErrInvalid, u.Scheme)
	}
	q, err := lease.URLQuery(u, append([]string{"prefix"}, redisParams...)...)
	if err != nil {
		return nil, err
	}
	var lopts []Option
	if q.Has("prefix") {
		p := q.Get("prefix")
		if err := checkPrefix(p); err != nil {
			return nil, err
		}
		lopts = append(lopts, WithPrefix(p))
		q.Del("prefix")
	}
	ru := *u
	ru.RawQuery = q.Encode()
	ropts, err := redis.ParseURL(ru.String())
	if err != nil {
		return nil, fmt.Errorf("%w: lease/redis: %v", lease.ErrInvalid, err)
	}
	client := redis.NewClient(ropts)
	l := New(client, append(lopts, opts...)...)
	l.owned = true
	if err := l.loadScripts(ctx); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("lease/redis: connect to %s: %w", ropts.Addr, err)
	}
	return l, nil
}

// loadScripts puts every script in the server's script cache in one
// pipelined round trip. It calls SCRIPT LOAD itself rather than
// redis.Script.Load, which would record the still-empty reply of a
// pipelined command as the script's SHA.
func (l *Locker) loadScripts(ctx context.Context) error {
	pipe := l.client.Pipeline()
	for _, src := range allSources {
		pipe.ScriptLoad(ctx, src)
	}
	_, err := pipe.Exec(ctx)
	return err
}
