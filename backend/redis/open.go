package redislease

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

func init() {
	opener := func(ctx context.Context, u *url.URL) (lease.Locker, error) {
		return open(ctx, u, nil)
	}
	for _, scheme := range []string{"redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster"} {
		lease.Register(scheme, opener)
	}
}

// Open connects to the single Redis server of a redis:// or rediss:// (TLS)
// URL, such as redis://user:password@host:6379/0?prefix=myapp:lease:, and
// returns a Locker that owns the client: its Close closes the connections.
// The query parameters are listed in the package documentation; an unknown
// one, or a bad value, is an error matching lease.ErrInvalid that never
// quotes the password. opts apply after the URL's parameters.
//
// The client Open builds follows context deadlines (go-redis's
// ContextTimeoutEnabled): every call on the Locker returns by its
// context's deadline. Open itself loads the scripts into the server's
// script cache within ctx, so it fails early, by ctx's deadline, when the
// server cannot be reached or does not answer, and the first operations
// take one round trip each.
//
// Open also takes a Redis behind Sentinels, or a Redis Cluster:
//
//	redis+sentinel://[user:password@]h1:26379,h2:26379/0?master_name=mymaster[&sentinel_username=U&sentinel_password=P]
//	redis+cluster://[user:password@]h1:7000,h2:7001
//
// (rediss+sentinel, rediss+cluster for TLS). A Sentinel URL opens a
// go-redis FailoverClient that follows the master the Sentinels name; its
// user and password are the master's, sentinel_username and
// sentinel_password the Sentinels'. A Cluster URL opens a ClusterClient;
// one node is enough to find the others, and its database is 0. Both
// take the redis:// parameters, and their clients follow context
// deadlines too. go-redis's own forms (ParseFailoverURL's and
// ParseClusterURL's addr=, master_name on a redis:// URL) are refused
// with an error showing these.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Locker, error) {
	u, err := driver.ParseURL(rawURL)
	if err != nil {
		// driver.ParseURL's reason may quote a piece of the password (an
		// invalid port ":Hunter2" after "redis://:Hunter2#x@host", an
		// invalid escape "%zz"): give a reason of our own instead.
		return nil, fmt.Errorf("lease/redis: open: %w: the URL does not parse: a bad port or %%-escape, or an unescaped '@', ':', '/', '?' or '#' in the user name or password (escape '#' as %%23)", lease.ErrInvalid)
	}
	return open(ctx, u, opts)
}

// open is Open for a URL already parsed, by Open or by lease.Open.
func open(ctx context.Context, u *url.URL, opts []Option) (*Locker, error) {
	var (
		client  redis.UniversalClient
		urlOpts []Option
		where   string
	)
	switch base, kind := topologyScheme(u.Scheme); {
	case kind == "sentinel" || kind == "cluster":
		if base != "redis" && base != "rediss" {
			return nil, fmt.Errorf("lease/redis: open: %w: URL scheme %q is not redis+%s or rediss+%s", lease.ErrInvalid, u.Scheme, kind, kind)
		}
		c, p, err := topologyClient(u, base, kind)
		if err != nil {
			return nil, fmt.Errorf("lease/redis: open: %w", err)
		}
		client, urlOpts, where = c, p, kind+" "+u.Host
	default:
		ropts, p, err := clientOptions(u)
		if err != nil {
			return nil, fmt.Errorf("lease/redis: open: %w", err)
		}
		client, urlOpts, where = redis.NewClient(ropts), p, ropts.Addr
	}
	opts = append(urlOpts, opts...)
	l, err := newLocker(client, true, opts)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	if err := l.s.loadScripts(ctx); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("lease/redis: open: load scripts on %s: %w", where, callErr(ctx, err))
	}
	return l, nil
}

// loadScripts puts every script in the server's script cache in one
// pipelined round trip. It calls SCRIPT LOAD itself rather than
// redis.Script.Load, which would record the still-empty reply of a
// pipelined command as the script's SHA.
func (s *store) loadScripts(ctx context.Context) error {
	pipe := s.client.Pipeline()
	for _, src := range allSources {
		pipe.ScriptLoad(ctx, src)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// clientOptions turns a redis:// or rediss:// URL into go-redis options,
// and returns the Options its own parameters ask for (prefix,
// wait_replicas, wait_timeout). It reads the URL
// as redis.ParseURL does (user, password, host, port 6379 by default,
// database number as the path, the same query parameters), but parses
// nothing twice, refuses what go-redis would silently ignore, and never
// puts the password in an error.
func clientOptions(u *url.URL) (*redis.Options, []Option, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "redis" && scheme != "rediss" {
		return nil, nil, fmt.Errorf("%w: URL scheme %q is not redis or rediss", lease.ErrInvalid, u.Scheme)
	}
	if u.Opaque != "" {
		return nil, nil, fmt.Errorf("%w: %s URL has no host (want %s://host:6379/0)", lease.ErrInvalid, scheme, scheme)
	}
	if u.Fragment != "" {
		// A '#' here usually began in an unescaped password or prefix.
		return nil, nil, fmt.Errorf("%w: %s URL has a fragment (#...): escape '#' as %%23", lease.ErrInvalid, scheme)
	}
	o := &redis.Options{
		Network: "tcp",
		// Every read and write deadline is the earlier of the context's
		// deadline and the timeout: without it go-redis would wait out
		// ReadTimeout (5s) on a store that stopped answering, whatever
		// the caller's deadline (issue 9, defect 1).
		ContextTimeoutEnabled: true,
	}
	if u.User != nil {
		o.Username = u.User.Username()
		o.Password, _ = u.User.Password()
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "localhost"
	}
	if port == "" {
		port = "6379"
	} else if n, err := parseInt(port); err != nil || n < 1 || n > 65535 {
		return nil, nil, fmt.Errorf("%w: %s URL port %q is not between 1 and 65535", lease.ErrInvalid, scheme, port)
	}
	o.Addr = net.JoinHostPort(host, port)
	switch db := strings.Trim(u.Path, "/"); {
	case db == "":
	case strings.Contains(db, "/"):
		return nil, nil, fmt.Errorf("%w: %s URL path %q is not a database number (want /0 to /15 or as configured)", lease.ErrInvalid, scheme, u.Path)
	default:
		n, err := parseInt(db)
		if err != nil || n < 0 {
			return nil, nil, fmt.Errorf("%w: %s URL path %q is not a database number (want /0 to /15 or as configured)", lease.ErrInvalid, scheme, u.Path)
		}
		o.DB = n
	}
	if scheme == "rediss" {
		o.TLSConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	if err := topologyHint(u); err != nil {
		return nil, nil, err
	}
	q, err := driver.URLQuery(u, append([]string{"prefix", "wait_replicas", "wait_timeout"}, redisParams...)...)
	if err != nil {
		return nil, nil, err
	}
	var opts []Option
	if q.Has("prefix") {
		p := q.Get("prefix")
		if err := checkPrefix(p); err != nil {
			return nil, nil, fmt.Errorf("%w: query parameter prefix: %v", lease.ErrInvalid, err)
		}
		opts = append(opts, WithPrefix(p))
	}
	if q.Has("wait_replicas") || q.Has("wait_timeout") {
		n, err := intParam("wait_replicas", q.Get("wait_replicas"), 1, 1<<16)
		if err != nil {
			return nil, nil, err
		}
		d := defaultReplicaTimeout
		if q.Has("wait_timeout") {
			if d, err = durationParam("wait_timeout", q.Get("wait_timeout")); err != nil {
				return nil, nil, err
			}
		}
		opts = append(opts, WithReplicaAck(n, d))
	}
	if err := applyParams(o, scheme, q); err != nil {
		return nil, nil, err
	}
	return o, opts, nil
}

// topologyHint is the error for a parameter that only a Sentinel or
// Cluster URL has, or that go-redis's ParseFailoverURL and
// ParseClusterURL take (addr, master_name, and the userinfo that means
// the Sentinels' there), in a URL that reached clientOptions; nil if u has
// none. Lockers take those servers by their own schemes, whose hosts are
// listed in the URL's host.
func topologyHint(u *url.URL) error {
	q := u.Query()
	switch {
	case q.Has("addr"):
		return fmt.Errorf("%w: %s URL: addr= lists more servers, as go-redis's ParseClusterURL and ParseFailoverURL take them; here every server goes in the URL's host, separated by commas: %s+cluster://h1:7000,h2:7001 for a Redis Cluster, %s+sentinel://h1:26379,h2:26379/0?master_name=NAME for Sentinels", lease.ErrInvalid, u.Scheme, u.Scheme, u.Scheme)
	case q.Has("master_name"), q.Has("sentinel_username"), q.Has("sentinel_password"):
		return fmt.Errorf("%w: %s URL: master_name and the sentinel_ parameters are for Sentinels: write %s+sentinel://h1:26379,h2:26379/0?master_name=NAME (the user information there is the master's; sentinel_username and sentinel_password the Sentinels')", lease.ErrInvalid, u.Scheme, u.Scheme)
	}
	return nil
}
