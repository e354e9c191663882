package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// DefaultDialTimeout is how long Open waits for the cluster to answer
// unless the URL's dial_timeout says otherwise (and never longer than its
// context allows).
const DefaultDialTimeout = 5 * time.Second

func init() {
	opener := func(ctx context.Context, u *url.URL) (lease.Locker, error) {
		l, err := open(ctx, u)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	lease.Register("etcd", opener)
	lease.Register("etcds", opener)
}

// Open returns a Locker on the etcd cluster named by rawURL,
//
//	etcd://[user:password@]host:port[,host:port...][/][?prefix=P&dial_timeout=D]
//
// with its own client, which the Locker's Close closes. The query
// parameters are listed in the package documentation; an unknown one is an
// error matching lease.ErrInvalid. opts apply after the URL's parameters.
//
// Open checks that the cluster answers (one linearizable read of a single
// key) before it returns, waiting at most dial_timeout and never past
// ctx's end: a cluster that is unreachable, has no leader, or accepts
// connections and never answers fails Open with an error matching
// context.DeadlineExceeded (or ctx's error), and Open leaves nothing
// running. No error of Open contains the URL's password.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Locker, error) {
	u, err := driver.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("lease/etcd: open: %w", err)
	}
	return open(ctx, u, opts...)
}

// open is Open with the URL parsed, for Open and for lease.Open.
func open(ctx context.Context, u *url.URL, opts ...Option) (*Locker, error) {
	l, err := dial(ctx, u, opts)
	if err != nil {
		return nil, fmt.Errorf("lease/etcd: open: %w", err)
	}
	return l, nil
}

func dial(ctx context.Context, u *url.URL, opts []Option) (*Locker, error) {
	cfg, urlOpts, err := config(u)
	if err != nil {
		return nil, err
	}
	o, err := newOptions(append(urlOpts, opts...))
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	client, closeClient, err := makeClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := ping(ctx, client, cfg, o.prefix); err != nil {
		_ = closeClient()
		return nil, err
	}
	return makeLocker(client, closeClient, o), nil
}

// makeClient makes the etcd client for cfg and the function that closes
// it. clientv3.New authenticates, when cfg has a user and password, with
// a request bounded by the dial timeout but not by ctx; so the client's
// root context is one that ends if ctx ends while New runs.
func makeClient(ctx context.Context, cfg clientv3.Config) (*clientv3.Client, func() error, error) {
	root, cancel := context.WithCancel(context.Background())
	cfg.Context = root
	stop := context.AfterFunc(ctx, cancel)
	client, err := clientv3.New(cfg)
	stopped := stop()
	if err != nil {
		cancel()
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		return nil, nil, fmt.Errorf("etcd client: %w", err)
	}
	if !stopped {
		_ = client.Close()
		cancel()
		return nil, nil, fmt.Errorf("etcd client: %w", ctx.Err())
	}
	return client, func() error {
		defer cancel()
		return client.Close()
	}, nil
}

// ping checks that the cluster answers: a linearizable read of one key
// (the prefix itself, which no tenure uses: names are never empty), which
// needs a leader and a quorum and sends nothing to etcd's log. It waits at
// most cfg.DialTimeout, and never past ctx's end.
func ping(ctx context.Context, client *clientv3.Client, cfg clientv3.Config, prefix string) error {
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	_, err := client.Get(pctx, prefix, clientv3.WithCountOnly())
	if err == nil {
		return nil
	}
	at := strings.Join(cfg.Endpoints, ",")
	cerr := pctx.Err()
	switch {
	case cerr == nil:
		return fmt.Errorf("etcd at %s: %w", at, err)
	case !errors.Is(err, cerr):
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	if ctx.Err() == nil {
		return fmt.Errorf("etcd at %s did not answer within dial_timeout %s: %w", at, cfg.DialTimeout, err)
	}
	return fmt.Errorf("etcd at %s did not answer: %w", at, err)
}

// config turns an etcd:// URL into a client configuration and Locker
// options. Its errors never quote the URL's user information.
func config(u *url.URL) (clientv3.Config, []Option, error) {
	secure := strings.EqualFold(u.Scheme, "etcds")
	if !secure && !strings.EqualFold(u.Scheme, "etcd") {
		return clientv3.Config{}, nil, fmt.Errorf("%w: scheme %q is not etcd or etcds", lease.ErrInvalid, u.Scheme)
	}
	known := []string{"prefix", "dial_timeout"}
	if secure {
		known = append(known, tlsParams...)
	}
	q, err := driver.URLQuery(u, known...)
	if err != nil {
		if !secure && hasAny(u, append([]string{"tls"}, tlsParams...)) {
			return clientv3.Config{}, nil, fmt.Errorf("%w: etcd URL: %s are for TLS: use an etcds:// URL", lease.ErrInvalid, strings.Join(tlsParams, ", "))
		}
		return clientv3.Config{}, nil, err
	}
	if u.Opaque != "" || (u.Path != "" && u.Path != "/") {
		return clientv3.Config{}, nil, fmt.Errorf("%w: etcd URL takes no path, got %q (want etcd://host:port[,host:port])", lease.ErrInvalid, u.EscapedPath()+u.Opaque)
	}
	if u.Host == "" {
		return clientv3.Config{}, nil, fmt.Errorf("%w: etcd URL names no endpoint (want etcd://host:port[,host:port])", lease.ErrInvalid)
	}
	var endpoints []string
	for _, h := range strings.Split(u.Host, ",") {
		if err := checkEndpoint(h); err != nil {
			return clientv3.Config{}, nil, err
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
		if cfg.Username == "" || cfg.Password == "" {
			return clientv3.Config{}, nil, fmt.Errorf("%w: etcd URL needs both a user and a password for etcd's authentication, or neither", lease.ErrInvalid)
		}
	}
	if v, ok := q["dial_timeout"]; ok {
		d, err := time.ParseDuration(v[0])
		if err != nil || d <= 0 {
			return clientv3.Config{}, nil, fmt.Errorf("%w: etcd URL: dial_timeout %q is not a positive duration such as 5s", lease.ErrInvalid, v[0])
		}
		cfg.DialTimeout = d
	}
	if secure {
		if cfg.TLS, err = tlsConfig(q); err != nil {
			return clientv3.Config{}, nil, err
		}
	}
	var opts []Option
	if v, ok := q["prefix"]; ok {
		if v[0] == "" {
			return clientv3.Config{}, nil, fmt.Errorf("%w: etcd URL: prefix is empty, which would make every key of the cluster a tenure", lease.ErrInvalid)
		}
		opts = append(opts, WithPrefix(v[0]))
	}
	return cfg, opts, nil
}

// checkEndpoint reports whether h is host:port with a port etcd could
// listen on.
func checkEndpoint(h string) error {
	if h == "" {
		return fmt.Errorf("%w: etcd URL has an empty endpoint (want host:port endpoints separated by commas)", lease.ErrInvalid)
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil || host == "" {
		return fmt.Errorf("%w: etcd URL endpoint %q is not host:port", lease.ErrInvalid, h)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("%w: etcd URL endpoint %q has port %q, not a number from 1 to 65535", lease.ErrInvalid, h, port)
	}
	return nil
}
