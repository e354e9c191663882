package etcdlease

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/leasekit/lease"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// DefaultDialTimeout is how long Open's client waits for a connection
// unless the URL's dial_timeout says otherwise.
const DefaultDialTimeout = 5 * time.Second

func init() {
	lease.Register("etcd", func(ctx context.Context, u *url.URL) (lease.Locker, error) {
		return openURL(ctx, u)
	})
}

// Open returns a Locker on the etcd cluster named by rawURL,
//
//	etcd://[user:password@]host:port[,host:port...][/][?prefix=P&dial_timeout=D]
//
// with its own client, which the Locker's Close closes. The query
// parameters are listed in the package documentation; an unknown one is an
// error matching lease.ErrInvalid. Open does not wait for the cluster to
// answer: an unreachable one makes the Locker's calls fail. Like every etcd
// client call, they wait for the cluster for as long as their context
// allows, so give them a deadline.
func Open(ctx context.Context, rawURL string) (*Locker, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: etcd URL: %v", lease.ErrInvalid, err)
	}
	l, err := openURL(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("lease/etcd: open %s: %w", lease.Redact(rawURL), err)
	}
	return l, nil
}

// config turns an etcd:// URL into a client configuration and Locker
// options.
func config(u *url.URL) (clientv3.Config, []Option, error) {
	if !strings.EqualFold(u.Scheme, "etcd") {
		return clientv3.Config{}, nil, fmt.Errorf("%w: scheme %q is not etcd", lease.ErrInvalid, u.Scheme)
	}
	q, err := lease.URLQuery(u, "prefix", "dial_timeout")
	if err != nil {
		return clientv3.Config{}, nil, err
	}
	if u.Opaque != "" || (u.Path != "" && u.Path != "/") {
		return clientv3.Config{}, nil, fmt.Errorf("%w: etcd URL takes no path, got %q (want etcd://host:port[,host:port])", lease.ErrInvalid, u.Path+u.Opaque)
	}
	var endpoints []string
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			return clientv3.Config{}, nil, fmt.Errorf("%w: etcd URL needs host:port endpoints separated by commas, got %q", lease.ErrInvalid, u.Host)
		}
		endpoints = append(endpoints, h)
	}
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: DefaultDialTimeout,
		Logger:      zap.NewNop(),
	}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	if v, ok := q["dial_timeout"]; ok {
		d, err := time.ParseDuration(v[0])
		if err != nil || d <= 0 {
			return clientv3.Config{}, nil, fmt.Errorf("%w: etcd URL: dial_timeout %q is not a positive duration such as 5s", lease.ErrInvalid, v[0])
		}
		cfg.DialTimeout = d
	}
	var opts []Option
	if v, ok := q["prefix"]; ok {
		if v[0] == "" {
			return clientv3.Config{}, nil, fmt.Errorf("%w: etcd URL: prefix is empty", lease.ErrInvalid)
		}
		opts = append(opts, WithPrefix(v[0]))
	}
	return cfg, opts, nil
}

func openURL(_ context.Context, u *url.URL) (*Locker, error) {
	cfg, opts, err := config(u)
	if err != nil {
		return nil, err
	}
	client, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	l := New(client, opts...)
	l.owned = true
	return l, nil
}
