package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/leasekit/lease"
	etcdlease "github.com/leasekit/lease/backend/etcd"
	redislease "github.com/leasekit/lease/backend/redis"
	sqllease "github.com/leasekit/lease/backend/sql"
	mysqllease "github.com/leasekit/lease/backend/sql/mysql"
	postgreslease "github.com/leasekit/lease/backend/sql/postgres"
	"github.com/leasekit/lease/driver"
)

// The stores, by their flag names.
const (
	kindRedis    = "redis"
	kindPostgres = "postgres"
	kindMySQL    = "mysql"
	kindEtcd     = "etcd"
)

// dialTimeout bounds connecting to a store (and the proxy's dials).
const dialTimeout = 10 * time.Second

// target is a store named on the command line.
type target struct {
	kind string // kindRedis, ...
	addr string // the flag's value: a URL, or etcd endpoints
}

// connOpts says how to connect to a store for one mode.
type connOpts struct {
	// proxy routes Redis and SQL connections through a counting proxy;
	// etcd's RPCs are always counted (by a gRPC interceptor).
	proxy bool
	// leaseURL opens the lease Locker with the backend's own URL opener
	// (what a user of lease.Open gets) instead of on the shared client.
	// Only Redis and SQL have one that can take the proxy's address.
	leaseURL bool
	// pool is the SQL pool's size, and the least Redis pool size.
	pool int
	// via maps a store's address (host:port) to the address to dial
	// instead: the net mode's delaying proxies. It takes precedence over
	// proxy.
	via map[string]string
}

// storeConn is one connection to a store, shared by lease and its peers
// in a mode: the same client, so the same pool and settings on both sides.
type storeConn struct {
	kind    string
	label   string // "Redis", "PostgreSQL", "MariaDB", ...
	version string
	id      string // random, names this connection's keys and tables

	redis *redis.Client
	db    *sql.DB
	etcd  *clientv3.Client

	locker   lease.Locker // lease on this store
	openNote string       // how the Locker was opened, when not as asked
	// newLocker opens another Locker on the store, as c.locker was
	// opened: for callers that stand for separate processes.
	newLocker func() (lease.Locker, error)

	proxy *proxy
	rpcs  *atomic.Int64 // etcd: RPCs sent, and messages on streams

	closers []func() // run in reverse by close
}

// redisPrefix is the prefix of every Redis key of this connection: the
// lease Locker's keys and the peers' keys all live under it.
func (c *storeConn) redisPrefix() string { return "leasebench:" + c.id + ":" }

// etcdPrefix is the prefix of every etcd key of this connection.
func (c *storeConn) etcdPrefix() string { return "leasebench/" + c.id + "/" }

// table is the name of one of this connection's SQL tables.
func (c *storeConn) table(what string) string { return "leasebench_" + c.id + "_" + what }

// count returns what the connection counts: round trips through the
// proxy (Redis, SQL) or RPCs (etcd), or 0 when it counts nothing.
func (c *storeConn) count() int64 {
	switch {
	case c.proxy != nil:
		return c.proxy.RoundTrips()
	case c.rpcs != nil:
		return c.rpcs.Load()
	}
	return 0
}

func (c *storeConn) onClose(f func()) { c.closers = append(c.closers, f) }

// close removes every key and table the connection made and closes it.
func (c *storeConn) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.cleanup(ctx)
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
}

func (c *storeConn) cleanup(ctx context.Context) {
	switch c.kind {
	case kindRedis:
		iter := c.redis.Scan(ctx, 0, c.redisPrefix()+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
			if len(keys) == 1000 {
				c.redis.Unlink(ctx, keys...)
				keys = keys[:0]
			}
		}
		if len(keys) > 0 {
			c.redis.Unlink(ctx, keys...)
		}
	case kindPostgres, kindMySQL:
		// lease_marks: the waiters' marks beside a PostgreSQL leases table.
		for _, t := range []string{"lease", "lease_marks", "floor"} {
			_, _ = c.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+c.table(t))
		}
	case kindEtcd:
		_, _ = c.etcd.Delete(ctx, c.etcdPrefix(), clientv3.WithPrefix())
	}
}

// newID returns a short random identifier for keys and table names.
func newID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// connect opens a connection to t for one mode. Errors never quote a
// password.
func connect(ctx context.Context, t target, o connOpts) (c *storeConn, err error) {
	c = &storeConn{kind: t.kind, id: newID()}
	defer func() {
		if err != nil {
			for i := len(c.closers) - 1; i >= 0; i-- {
				c.closers[i]()
			}
			err = fmt.Errorf("%s: %w", t.kind, err)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	switch t.kind {
	case kindRedis:
		err = c.connectRedis(ctx, t.addr, o)
	case kindPostgres, kindMySQL:
		err = c.connectSQL(ctx, t.addr, o)
	case kindEtcd:
		err = c.connectEtcd(ctx, t.addr, o)
	default:
		err = fmt.Errorf("unknown store %q", t.kind)
	}
	return c, err
}

// dialAddr is the address to dial for the store at addr: o.via's
// proxy, or a counting proxy of its own with o.proxy, or addr.
func (c *storeConn) dialAddr(addr string, o connOpts) (string, error) {
	if v, ok := o.via[addr]; ok {
		return v, nil
	}
	if o.proxy {
		return c.useProxy(addr)
	}
	return addr, nil
}

// targetAddrs are the host:port addresses t's flag names.
func targetAddrs(t target) ([]string, error) {
	switch t.kind {
	case kindRedis:
		opts, err := redis.ParseURL(t.addr)
		if err != nil {
			return nil, fmt.Errorf("bad -redis URL %s: %v", driver.Redact(t.addr), redactErr(err, t.addr))
		}
		return []string{opts.Addr}, nil
	case kindPostgres, kindMySQL:
		u, err := url.Parse(t.addr)
		if err != nil {
			return nil, fmt.Errorf("bad URL %s", driver.Redact(t.addr))
		}
		return []string{sqlAddr(t.kind, u)}, nil
	case kindEtcd:
		eps := etcdEndpoints(t.addr)
		if len(eps) == 0 {
			return nil, errors.New("-etcd names no endpoint (want host:port[,host:port])")
		}
		return eps, nil
	}
	return nil, fmt.Errorf("unknown store %q", t.kind)
}

// useProxy starts a counting proxy to addr and returns the address to dial.
func (c *storeConn) useProxy(addr string) (string, error) {
	p, err := startProxy(addr)
	if err != nil {
		return "", err
	}
	c.proxy = p
	c.onClose(p.Close)
	return p.Addr(), nil
}

func (c *storeConn) connectRedis(ctx context.Context, raw string, o connOpts) error {
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return fmt.Errorf("bad -redis URL %s: %v", driver.Redact(raw), redactErr(err, raw))
	}
	dial, err := c.dialAddr(opts.Addr, o)
	if err != nil {
		return err
	}
	opts.Addr = dial
	// Calls end at their context's deadline, as redislease.Open's do.
	opts.ContextTimeoutEnabled = true
	if opts.PoolSize == 0 {
		opts.PoolSize = 10 * max(1, numCPU())
	}
	opts.PoolSize = max(opts.PoolSize, o.pool)
	c.redis = redis.NewClient(opts)
	c.onClose(func() { _ = c.redis.Close() })
	if err := c.redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("no answer: %w", err)
	}
	c.label, c.version = "Redis", "(version unknown)"
	if info, err := c.redis.Info(ctx, "server").Result(); err == nil {
		c.version = infoField(info, "redis_version")
	}
	if o.leaseURL {
		u, err := url.Parse(raw)
		if err != nil {
			return err
		}
		u.Host = dial
		q := u.Query()
		q.Set("prefix", c.redisPrefix()+"lease:")
		u.RawQuery = q.Encode()
		l, err := redislease.Open(ctx, u.String())
		switch {
		case err == nil:
			c.locker = l
		case errors.Is(err, lease.ErrInvalid):
			c.openNote = "lease is on redislease.New with this command's client: redislease.Open refused the URL (" + short(err) + ")"
		default:
			return err
		}
	}
	if c.locker == nil {
		l, err := redislease.New(c.redis, redislease.WithPrefix(c.redisPrefix()+"lease:"))
		if err != nil {
			return err
		}
		c.locker = l
	}
	c.newLocker = func() (lease.Locker, error) {
		return redislease.New(c.redis, redislease.WithPrefix(c.redisPrefix()+"lease:"))
	}
	c.onClose(func() { _ = c.locker.Close() })
	return nil
}

// infoField returns field's value from Redis INFO output.
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return "?"
}

func (c *storeConn) connectSQL(ctx context.Context, raw string, o connOpts) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("bad URL %s", driver.Redact(raw))
	}
	dial, err := c.dialAddr(sqlAddr(c.kind, u), o)
	if err != nil {
		return err
	}
	if c.db, err = openDB(c.kind, u, dial); err != nil {
		return err
	}
	c.onClose(func() { _ = c.db.Close() })
	pool := max(o.pool, 1)
	c.db.SetMaxOpenConns(pool)
	c.db.SetMaxIdleConns(pool)
	c.db.SetConnMaxIdleTime(time.Minute)
	var version string
	if err := c.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return fmt.Errorf("no answer: %w", err)
	}
	c.version = version
	switch {
	case c.kind == kindPostgres:
		c.label = "PostgreSQL"
		if f := strings.Fields(version); len(f) > 1 {
			c.version = f[1]
		}
	case strings.Contains(version, "MariaDB"):
		c.label = "MariaDB"
	default:
		c.label = "MySQL"
	}
	if err := createFloor(ctx, c); err != nil {
		return fmt.Errorf("create the floor's table: %w", err)
	}
	if o.leaseURL {
		lu := *u
		lu.Host = dial
		q := lu.Query()
		q.Set("table", c.table("lease"))
		lu.RawQuery = q.Encode()
		open := postgreslease.Open
		if c.kind == kindMySQL {
			open = mysqllease.Open
		}
		l, err := open(ctx, lu.String())
		switch {
		case err == nil:
			c.locker = l
			c.newLocker = func() (lease.Locker, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				return open(ctx, lu.String())
			}
		case errors.Is(err, lease.ErrInvalid):
			c.openNote = "lease is on sqllease.New with this command's pool: the backend's URL opener refused the URL (" + short(err) + ")"
		default:
			return err
		}
	}
	if c.locker == nil {
		l, err := sqllease.New(c.db, sqllease.WithTable(c.table("lease")))
		if err != nil {
			return err
		}
		c.locker = l
		c.newLocker = func() (lease.Locker, error) {
			return sqllease.New(c.db, sqllease.WithTable(c.table("lease")))
		}
	}
	c.onClose(func() { _ = c.locker.Close() })
	// The first operation creates the table: do it now, untimed.
	if _, err := c.locker.Inspect(ctx, "warm-up"); err != nil && !errors.Is(err, lease.ErrNotHeld) {
		return err
	}
	return nil
}

// sqlAddr is the host:port of a postgres:// or mysql:// URL, with the
// default port.
func sqlAddr(kind string, u *url.URL) string {
	addr := u.Host
	if _, _, err := net.SplitHostPort(addr); err != nil {
		port := "5432"
		if kind == kindMySQL {
			port = "3306"
		}
		addr = net.JoinHostPort(strings.Trim(cmpOr(addr, "127.0.0.1"), "[]"), port)
	}
	return addr
}

// openDB opens a database/sql pool on u (a postgres:// or mysql:// URL)
// dialling addr, the way the lease backends' URL openers do: pgx's
// stdlib driver, or go-sql-driver with interpolated parameters. Query
// parameters go to the driver (PostgreSQL: libpq's, and any other is a
// run-time parameter such as synchronous_commit=off; MySQL: the DSN's).
func openDB(kind string, u *url.URL, addr string) (*sql.DB, error) {
	host, port, _ := net.SplitHostPort(addr)
	if kind == kindPostgres {
		cfg, err := pgx.ParseConfig(u.String())
		if err != nil {
			return nil, fmt.Errorf("bad -postgres URL %s", driver.Redact(u.String()))
		}
		p, _ := strconv.ParseUint(port, 10, 16)
		cfg.Host, cfg.Port, cfg.Fallbacks = host, uint16(p), nil
		return stdlib.OpenDB(*cfg), nil
	}
	dsn := fmt.Sprintf("tcp(%s)/%s", addr, strings.TrimPrefix(u.Path, "/"))
	if u.RawQuery != "" {
		dsn += "?" + u.RawQuery
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("bad -mysql URL %s", driver.Redact(u.String()))
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.InterpolateParams = true
	cfg.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

// etcdEndpoints are the endpoints of an -etcd flag.
func etcdEndpoints(raw string) []string {
	var eps []string
	raw = strings.TrimPrefix(raw, "etcd://")
	for _, ep := range strings.Split(raw, ",") {
		ep = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(ep), "http://"), "/")
		if ep != "" {
			eps = append(eps, ep)
		}
	}
	return eps
}

func (c *storeConn) connectEtcd(ctx context.Context, raw string, o connOpts) error {
	eps := etcdEndpoints(raw)
	if len(eps) == 0 {
		return errors.New("-etcd names no endpoint (want host:port[,host:port])")
	}
	for i, ep := range eps {
		// Only the net mode's proxies: etcd's RPCs are counted by an
		// interceptor, not a counting proxy.
		if v, ok := o.via[ep]; ok {
			eps[i] = v
		}
	}
	c.rpcs = new(atomic.Int64)
	n := c.rpcs
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: dialTimeout,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				n.Add(1)
				return invoker(ctx, method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				s, err := streamer(ctx, desc, cc, method, opts...)
				if err != nil {
					return nil, err
				}
				return countingStream{s, n}, nil
			}),
		},
	})
	if err != nil {
		return err
	}
	c.etcd = cli
	c.onClose(func() { _ = cli.Close() })
	st, err := cli.Status(ctx, eps[0])
	if err != nil {
		return fmt.Errorf("no answer: %w", err)
	}
	c.label, c.version = "etcd", st.Version
	l, err := etcdlease.New(cli, etcdlease.WithPrefix(c.etcdPrefix()+"lease/"))
	if err != nil {
		return err
	}
	c.locker = l
	c.newLocker = func() (lease.Locker, error) {
		return etcdlease.New(cli, etcdlease.WithPrefix(c.etcdPrefix()+"lease/"))
	}
	c.onClose(func() { _ = l.Close() })
	return nil
}

// countingStream counts the messages a client sends on a gRPC stream (a
// keep-alive, a watch request).
type countingStream struct {
	grpc.ClientStream
	n *atomic.Int64
}

func (s countingStream) SendMsg(m any) error {
	s.n.Add(1)
	return s.ClientStream.SendMsg(m)
}

// redactErr is err's text without the URL's password.
func redactErr(err error, raw string) string {
	msg := err.Error()
	if u, perr := url.Parse(raw); perr == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
