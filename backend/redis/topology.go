package redislease

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
)

// Sentinel and Cluster by URL:
//
//	redis+sentinel://[user:password@]host:26379[,host:26379...][/db]?master_name=NAME[&sentinel_username=U&sentinel_password=P]
//	redis+cluster://[user:password@]host:7000[,host:7001...]
//
// and rediss+sentinel, rediss+cluster for TLS. The user and password are
// the data nodes' (the master's, the cluster's); sentinel_username and
// sentinel_password are the Sentinels' own, when they have one. Every
// other parameter of a redis:// URL (prefix and the go-redis options)
// means the same. A Sentinel URL opens a go-redis FailoverClient, which
// follows the master the Sentinels name; a Cluster URL a ClusterClient.
// Both have ContextTimeoutEnabled, as Open's plain client does.

// topologyParams are the parameters of Sentinel URLs beyond a redis://
// URL's.
var topologyParams = []string{"master_name", "sentinel_username", "sentinel_password"}

// topologyClient opens the client of a redis+sentinel or redis+cluster
// URL (kind "sentinel" or "cluster"; base "redis" or "rediss").
func topologyClient(u *url.URL, base, kind string) (redis.UniversalClient, []Option, error) {
	if u.Opaque != "" || u.Host == "" {
		return nil, nil, fmt.Errorf("%w: %s URL names no hosts (want %s://host:port[,host:port...])", lease.ErrInvalid, u.Scheme, u.Scheme)
	}
	q := u.Query()
	extra := map[string]string{}
	for _, k := range topologyParams {
		if vs, ok := q[k]; ok {
			if kind != "sentinel" {
				return nil, nil, fmt.Errorf("%w: %s is a parameter of Sentinel URLs, not of %s", lease.ErrInvalid, k, u.Scheme)
			}
			if len(vs) != 1 {
				return nil, nil, fmt.Errorf("%w: query parameter %q given %d times in %s URL", lease.ErrInvalid, k, len(vs), u.Scheme)
			}
			extra[k] = vs[0]
			q.Del(k)
		}
	}
	defPort := "6379"
	if kind == "sentinel" {
		defPort = "26379"
	}
	hosts := strings.Split(u.Host, ",")
	addrs := make([]string, 0, len(hosts))
	for _, h := range hosts {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = strings.Trim(h, "[]"), defPort
		}
		if n, err := parseInt(port); host == "" || err != nil || n < 1 || n > 65535 {
			return nil, nil, fmt.Errorf("%w: %s URL host %q is not host:port", lease.ErrInvalid, u.Scheme, h)
		}
		addrs = append(addrs, net.JoinHostPort(host, port))
	}
	// The rest is a redis:// URL's, checked and applied by clientOptions.
	one := *u
	one.Scheme, one.Host, one.RawQuery = base, addrs[0], q.Encode()
	o, opts, err := clientOptions(&one)
	if err != nil {
		return nil, nil, err
	}
	if kind == "cluster" {
		if o.DB != 0 {
			return nil, nil, fmt.Errorf("%w: %s URL path %q: a Redis Cluster has only database 0", lease.ErrInvalid, u.Scheme, u.Path)
		}
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: addrs, Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig,
			Protocol: o.Protocol, ClientName: o.ClientName, MaxRetries: o.MaxRetries,
			DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
			PoolSize: o.PoolSize, PoolTimeout: o.PoolTimeout, MinIdleConns: o.MinIdleConns, MaxIdleConns: o.MaxIdleConns,
			ConnMaxIdleTime: o.ConnMaxIdleTime, ConnMaxLifetime: o.ConnMaxLifetime,
			ContextTimeoutEnabled: true,
		}), opts, nil
	}
	if extra["master_name"] == "" {
		return nil, nil, fmt.Errorf("%w: %s URL needs master_name=NAME, the master the Sentinels watch", lease.ErrInvalid, u.Scheme)
	}
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: extra["master_name"], SentinelAddrs: addrs,
		SentinelUsername: extra["sentinel_username"], SentinelPassword: extra["sentinel_password"],
		Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: o.TLSConfig,
		Protocol: o.Protocol, ClientName: o.ClientName, MaxRetries: o.MaxRetries,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		PoolSize: o.PoolSize, PoolTimeout: o.PoolTimeout, MinIdleConns: o.MinIdleConns, MaxIdleConns: o.MaxIdleConns,
		ConnMaxIdleTime: o.ConnMaxIdleTime, ConnMaxLifetime: o.ConnMaxLifetime,
		ContextTimeoutEnabled: true,
	}), opts, nil
}

// topologyScheme splits "redis+sentinel" into "redis" and "sentinel"; kind
// is "" for a plain redis or rediss scheme.
func topologyScheme(scheme string) (base, kind string) {
	base, kind, _ = strings.Cut(strings.ToLower(scheme), "+")
	return base, kind
}
