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
	"time"

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

var dialect = sqlurl.Dialect{
	Dialect:   sqllease.MySQL,
	Params:    []string{"tls", "timeout"},
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
	cfg := mysql.NewConfig()
	cfg.Logger = &mysql.NopLogger{}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	host := u.Host
	if host == "" {
		host = "127.0.0.1"
	}
	if _, port, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(strings.Trim(host, "[]"), "3306")
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("%w: mysql URL: invalid port %q", lease.ErrInvalid, port)
	}
	cfg.Net = "tcp"
	cfg.Addr = host
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" {
		return nil, fmt.Errorf("%w: mysql URL names no database (want mysql://user:pass@host:3306/dbname)", lease.ErrInvalid)
	}
	cfg.InterpolateParams = true
	if v := q.Get("tls"); v != "" {
		switch v {
		case "true", "false", "skip-verify", "preferred":
			cfg.TLSConfig = v
		default:
			return nil, fmt.Errorf("%w: tls=%q (want true, false, skip-verify or preferred)", lease.ErrInvalid, v)
		}
	}
	if v := q.Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%w: timeout=%q is not a duration", lease.ErrInvalid, v)
		}
		cfg.Timeout = d
	}
	return cfg, nil
}
