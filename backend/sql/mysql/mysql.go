package mysqllease

import (
	"context"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/leasekit/lease"
	sqllease "github.com/leasekit/lease/backend/sql"
	"github.com/leasekit/lease/backend/sql/internal/classify"
	"github.com/leasekit/lease/backend/sql/internal/sqlurl"
)

func init() {
	dialect.Register("mysql")
	classify.Register(retryable)
}

// Every query parameter of the URL but the Locker's own (table,
// autocreate, max_conns, max_idle_conns) and socket goes to
// go-sql-driver's DSN parser, as in a DSN: tls, timeout, readTimeout,
// charset, collation, loc, ... configure the connection, and any other is
// a system variable set at connect (sql_mode, time_zone,
// innodb_lock_wait_timeout, ...), which the server refuses when it does
// not know it: Open then fails naming it. socket=/path/mysqld.sock
// connects through a Unix socket instead of the URL's host.
var dialect = sqlurl.Dialect{
	Dialect:   sqllease.MySQL,
	PassAll:   true,
	Connector: connector,
}

// Open opens a pool for a mysql:// URL and returns a Locker that owns it
// (Close closes it), after checking, within ctx, that the server answers
// and that the table exists or was created. Options given to Open
// override the URL's. A bad URL or an unknown query parameter is an error
// matching lease.ErrInvalid; a server that does not answer makes Open
// return when ctx ends, with an error matching ctx's.
func Open(ctx context.Context, rawURL string, opts ...sqllease.Option) (*sqllease.Locker, error) {
	return dialect.OpenRaw(ctx, rawURL, opts)
}

// retryable reports whether err is a go-sql-driver error after which the
// server has rolled the statement back: a deadlock victim (1213,
// ER_LOCK_DEADLOCK) or InnoDB's "record has changed since last read"
// (1020, ER_CHECKREAD). A lost connection is never one.
func retryable(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1213, 1020:
			return true
		}
	}
	return false
}

func connector(u *url.URL, q url.Values) (sqldriver.Connector, error) {
	cfg, err := config(u, q)
	if err != nil {
		return nil, err
	}
	return mysql.NewConnector(cfg)
}

// config turns mysql://user:pass@host:port/db into a go-sql-driver
// configuration with interpolateParams on (one round trip per statement)
// and a logger that drops what the driver would print.
func config(u *url.URL, q url.Values) (*mysql.Config, error) {
	pass := url.Values{}
	for k, v := range q {
		if !sqlurl.Ours(k) && k != "socket" {
			pass[k] = v
		}
	}
	if q.Has("clientFoundRows") {
		return nil, fmt.Errorf("%w: mysql URL: clientFoundRows changes the rows-affected counts the Locker reads; leave it out", lease.ErrInvalid)
	}
	if v := q.Get("tls"); v != "" {
		switch v {
		case "true", "false", "skip-verify", "preferred":
		default:
			return nil, fmt.Errorf("%w: tls=%q (want true, false, skip-verify or preferred)", lease.ErrInvalid, v)
		}
	}
	// The DSN parser reads the parameters; the URL gives the rest.
	cfg, err := mysql.ParseDSN("/?" + pass.Encode())
	if err != nil {
		return nil, fmt.Errorf("%w: mysql URL parameters: %v", lease.ErrInvalid, err)
	}
	cfg.Logger = &mysql.NopLogger{}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	if sock := q.Get("socket"); sock != "" {
		if !strings.HasPrefix(sock, "/") {
			return nil, fmt.Errorf("%w: socket=%q is not an absolute path to the server's Unix socket", lease.ErrInvalid, sock)
		}
		cfg.Net, cfg.Addr = "unix", sock
	} else {
		host := u.Host
		if host == "" {
			host = "127.0.0.1"
		}
		if _, port, err := net.SplitHostPort(host); err != nil {
			host = net.JoinHostPort(strings.Trim(host, "[]"), "3306")
		} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%w: mysql URL: invalid port %q", lease.ErrInvalid, port)
		}
		cfg.Net, cfg.Addr = "tcp", host
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" {
		return nil, fmt.Errorf("%w: mysql URL names no database (want mysql://user:pass@host:3306/dbname)", lease.ErrInvalid)
	}
	cfg.InterpolateParams = true
	return cfg, nil
}
