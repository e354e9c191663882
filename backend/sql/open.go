package sqllease

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the "sqlite" driver

	"github.com/leasekit/lease"
)

func init() {
	opener := func(ctx context.Context, u *url.URL) (lease.Locker, error) {
		return Open(ctx, u.String())
	}
	for _, s := range []string{"sqlite", "postgres", "postgresql", "mysql"} {
		lease.Register(s, opener)
	}
}

// Open opens a pool for a URL, and returns a Locker that owns it (Close
// closes it), after checking that the database answers and that the table
// exists or was created. The URL forms and query parameters are in the
// package documentation; an unknown parameter is an error matching
// lease.ErrInvalid. Options given to Open override the URL's.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Locker, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: lease/sql: URL: %v", lease.ErrInvalid, err)
	}
	var (
		drvName, dsn string
		db           *sql.DB
		q            url.Values
		dialect      Dialect
	)
	switch strings.ToLower(u.Scheme) {
	case "sqlite":
		dialect = SQLite
		q, err = lease.URLQuery(u, "table", "autocreate", "busy_timeout")
		if err == nil {
			drvName = "sqlite"
			dsn, err = sqliteDSN(u, q)
		}
	case "postgres", "postgresql":
		dialect = PostgreSQL
		q, err = lease.URLQuery(u, "table", "autocreate", "sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name")
		if err == nil {
			drvName = "pgx"
			dsn = postgresDSN(u, q)
		}
	case "mysql":
		dialect = MySQL
		q, err = lease.URLQuery(u, "table", "autocreate", "tls", "timeout")
		if err == nil {
			var cfg *mysql.Config
			if cfg, err = mysqlConfig(u, q); err == nil {
				var c driver.Connector
				if c, err = mysql.NewConnector(cfg); err == nil {
					db = sql.OpenDB(c)
				}
			}
		}
	default:
		return nil, fmt.Errorf("%w: lease/sql: unknown URL scheme %q (want sqlite, postgres, postgresql or mysql)", lease.ErrInvalid, u.Scheme)
	}
	if err != nil {
		return nil, err
	}
	urlOpts := []Option{WithDialect(dialect)}
	if t := q.Get("table"); t != "" {
		urlOpts = append(urlOpts, WithTable(t))
	}
	if v := q.Get("autocreate"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%w: lease/sql: autocreate=%q is not a boolean", lease.ErrInvalid, v)
		}
		if !b {
			urlOpts = append(urlOpts, WithoutAutoCreate())
		}
	}
	if db == nil {
		if db, err = sql.Open(drvName, dsn); err != nil {
			return nil, fmt.Errorf("lease/sql: open %s: %w", lease.Redact(rawURL), err)
		}
	}
	// database/sql keeps 2 idle connections by default: under contention
	// every other statement would pay for a new connection (a new backend
	// process on PostgreSQL).
	db.SetMaxIdleConns(16)
	db.SetConnMaxIdleTime(time.Minute)
	l, err := New(db, append(urlOpts, opts...)...)
	if err != nil {
		db.Close()
		return nil, err
	}
	l.ownsDB = true
	if err := l.setup(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("lease/sql: open %s: %w", lease.Redact(rawURL), err)
	}
	return l, nil
}

// sqliteDSN turns sqlite:///abs/path.db or sqlite:relative.db into a
// modernc.org/sqlite DSN with WAL and a busy timeout.
func sqliteDSN(u *url.URL, q url.Values) (string, error) {
	if u.Host != "" {
		return "", fmt.Errorf("%w: lease/sql: sqlite URL has a host %q (want sqlite:///absolute/path.db or sqlite:relative/path.db)", lease.ErrInvalid, u.Host)
	}
	path := u.Opaque
	if path == "" {
		path = u.Path
	}
	if path == "" {
		return "", fmt.Errorf("%w: lease/sql: sqlite URL has no file path (want sqlite:///absolute/path.db or sqlite:relative/path.db)", lease.ErrInvalid)
	}
	if strings.Contains(path, ":memory:") || strings.HasPrefix(path, "file:") || strings.Contains(path, "?") {
		return "", fmt.Errorf("%w: lease/sql: sqlite URL %q: give a plain file path (an in-memory SQLite database is not shared between the pool's connections; use the mem:// backend instead)", lease.ErrInvalid, path)
	}
	busy := 5000
	if v := q.Get("busy_timeout"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return "", fmt.Errorf("%w: lease/sql: busy_timeout=%q is not a number of milliseconds", lease.ErrInvalid, v)
		}
		busy = n
	}
	return fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)", path, busy), nil
}

// postgresDSN keeps the URL's user, password, host and database and only
// the whitelisted driver parameters.
func postgresDSN(u *url.URL, q url.Values) string {
	out := url.URL{Scheme: "postgres", User: u.User, Host: u.Host, Path: u.Path}
	pass := url.Values{}
	for _, k := range []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name"} {
		if v := q.Get(k); v != "" {
			pass.Set(k, v)
		}
	}
	out.RawQuery = pass.Encode()
	return out.String()
}

// mysqlConfig turns mysql://user:pass@host:port/db into a go-sql-driver
// configuration with interpolateParams on (one round trip per statement).
func mysqlConfig(u *url.URL, q url.Values) (*mysql.Config, error) {
	cfg := mysql.NewConfig()
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	host := u.Host
	if host == "" {
		host = "127.0.0.1"
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(strings.Trim(host, "[]"), "3306")
	}
	cfg.Net = "tcp"
	cfg.Addr = host
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" {
		return nil, fmt.Errorf("%w: lease/sql: mysql URL names no database (want mysql://user:pass@host:3306/dbname)", lease.ErrInvalid)
	}
	cfg.InterpolateParams = true
	if v := q.Get("tls"); v != "" {
		switch v {
		case "true", "false", "skip-verify", "preferred":
			cfg.TLSConfig = v
		default:
			return nil, fmt.Errorf("%w: lease/sql: tls=%q (want true, false, skip-verify or preferred)", lease.ErrInvalid, v)
		}
	}
	if v := q.Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("%w: lease/sql: timeout=%q is not a duration", lease.ErrInvalid, v)
		}
		cfg.Timeout = d
	}
	return cfg, nil
}
