package postgreslease

import (
	"context"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leasekit/lease"
	sqllease "github.com/leasekit/lease/backend/sql"
	"github.com/leasekit/lease/backend/sql/internal/sqlurl"
)

func init() { dialect.Register("postgres", "postgresql") }

// driverParams are the URL's query parameters passed on to pgx.
var driverParams = []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name"}

var dialect = sqlurl.Dialect{
	Dialect:   sqllease.PostgreSQL,
	Params:    driverParams,
	Connector: connector,
	Options:   listenerOption,
}

// listenerOption gives a Locker that Open makes a Listener on the same
// server, so that its waits are woken by PostgreSQL.
func listenerOption(u *url.URL, q url.Values) ([]sqllease.Option, error) {
	cfg, err := config(u, q)
	if err != nil {
		return nil, err
	}
	return []sqllease.Option{sqllease.WithListener(Listener(cfg))}, nil
}

// Open opens a pool for a postgres:// or postgresql:// URL and returns a
// Locker that owns it (Close closes it), after checking, within ctx, that
// the server answers and that the table exists or was created. Options
// given to Open override the URL's. A bad URL or an unknown query
// parameter is an error matching lease.ErrInvalid; a server that does not
// answer makes Open return when ctx ends, with an error matching ctx's.
func Open(ctx context.Context, rawURL string, opts ...sqllease.Option) (*sqllease.Locker, error) {
	return dialect.OpenRaw(ctx, rawURL, opts)
}

// connector turns the URL into a pgx connector.
func connector(u *url.URL, q url.Values) (sqldriver.Connector, error) {
	cfg, err := config(u, q)
	if err != nil {
		return nil, err
	}
	return stdlib.GetConnector(*cfg, stdlib.OptionShouldPing(shouldPing)), nil
}

// pingAfterIdle is how long a connection must have been idle before the
// pool pings it when handing it out. pgx's default is 1s, which makes
// every renewal of lease.Run (one every ttl/3) cost a ping and the
// statement: two round trips for one.
const pingAfterIdle = 30 * time.Second

// shouldPing has pgx ping a connection before reuse only after
// pingAfterIdle of idleness. A connection the server closed sooner (a
// restart, a killed backend) fails its next statement instead: the call
// returns an error (a store failure, never a lease outcome) and
// database/sql drops the connection, so the next call dials anew.
func shouldPing(_ context.Context, p stdlib.ShouldPingParams) bool {
	return p.IdleDuration > pingAfterIdle
}

// config keeps the URL's user, password, host and database and only the
// driver parameters, and lets pgx parse the result.
func config(u *url.URL, q url.Values) (*pgx.ConnConfig, error) {
	out := url.URL{Scheme: "postgres", User: u.User, Host: u.Host, Path: u.Path}
	pass := url.Values{}
	for _, k := range driverParams {
		if v := q.Get(k); v != "" {
			pass.Set(k, v)
		}
	}
	out.RawQuery = pass.Encode()
	cfg, err := pgx.ParseConfig(out.String())
	if err != nil {
		return nil, fmt.Errorf("%w: postgres URL: %s", lease.ErrInvalid, parseError(err, u))
	}
	return cfg, nil
}

// parseError is what pgx said about the URL, without the URL: pgx's
// *ParseConfigError quotes the connection string, with its best guess at
// the password masked, and a guess is not enough.
func parseError(err error, u *url.URL) string {
	msg := err.Error()
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		c := *pe
		c.ConnString = ""
		msg = strings.TrimPrefix(c.Error(), "cannot parse ``: ")
	}
	if pw, ok := u.User.Password(); ok && pw != "" && strings.Contains(msg, pw) {
		return "pgx refused the connection settings (its message quoted the password, so it is withheld)"
	}
	return msg
}
