package postgreslease

import (
	"context"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"regexp"
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

// Every query parameter of the URL but the Locker's own (table,
// autocreate, max_conns, max_idle_conns; pool_max_conns, pgxpool's name,
// is max_conns) goes to pgx.ParseConfig as in a libpq URL: libpq's
// keywords (host=/path/to/socket, sslmode, sslrootcert, connect_timeout,
// target_session_attrs, ...) and pgx's (statement_cache_capacity,
// default_query_exec_mode) configure the connection, and any other is a
// run-time setting sent to the server at connect (search_path,
// statement_timeout, application_name, synchronous_commit, an
// extension's myext.setting, ...), which refuses a name it does not know
// or a bad value: Open then fails with an error matching lease.ErrInvalid
// that names it. Refused the same way before connecting: a name that is
// not a PostgreSQL setting name (letters, digits, '_' and '$', with dots
// between the parts of an extension's), a libpq keyword that pgx does not
// implement (keepalives, gssencmode, ...: the server would call it an
// unknown setting), and a misspelling of one of the Locker's own (tabel,
// maxConns). A search_path may name pg_temp: the Locker asks the catalog
// where its table resolved and refuses a temporary one, and names it
// with its schema after that.
var dialect = sqlurl.Dialect{
	Dialect:   sqllease.PostgreSQL,
	PassAll:   true,
	Aliases:   map[string]string{"pool_max_conns": "max_conns"},
	Connector: connector,
	Options:   listenerOption,
}

// settingName matches what PostgreSQL takes as the name of a setting:
// a built-in one's, or an extension's (plan_filter.limit).
var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)*$`)

// libpqOnly are libpq's connection keywords that pgx does not implement,
// so that pgx would send them to the server as settings.
var libpqOnly = map[string]bool{
	"hostaddr": true, "keepalives": true, "keepalives_idle": true, "keepalives_interval": true,
	"keepalives_count": true, "tcp_user_timeout": true, "gssencmode": true, "gsslib": true,
	"gssdelegation": true, "requiressl": true, "sslcompression": true, "sslcrl": true,
	"sslcrldir": true, "sslkeylogfile": true, "requirepeer": true, "ssl_min_protocol_version": true,
	"ssl_max_protocol_version": true, "load_balance_hosts": true, "fallback_application_name": true,
	"oauth_issuer": true, "oauth_client_id": true, "oauth_client_secret": true, "oauth_scope": true,
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
	return settingsConnector{stdlib.GetConnector(*cfg, stdlib.OptionShouldPing(shouldPing))}, nil
}

// settingsConnector is pgx's connector, whose Connect fails with an error
// matching lease.ErrInvalid when the server refuses a run-time setting
// of the URL at connect (pgx sends every parameter it does not know
// itself as one): no connection of the URL can succeed, and the server's
// error names the setting.
type settingsConnector struct{ sqldriver.Connector }

func (c settingsConnector) Connect(ctx context.Context) (sqldriver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil && refusedSetting(err) {
		return nil, fmt.Errorf("%w: postgres URL: the server refused a run-time setting of the URL: %w", lease.ErrInvalid, err)
	}
	return conn, err
}

// refusedSetting reports whether err is the server refusing a run-time
// parameter of the startup message: one it does not know (42704), a bad
// value (22023), one that cannot be set at connect (55P02), or one the
// user may not set (42501, "permission denied to set parameter").
func refusedSetting(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "42704", "22023", "55P02":
		return true
	case "42501":
		return strings.Contains(pe.Message, "parameter")
	}
	return false
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

// config keeps the URL's user, password, host and database and every
// parameter that is not the Locker's, and lets pgx parse the result.
func config(u *url.URL, q url.Values) (*pgx.ConnConfig, error) {
	out := url.URL{Scheme: "postgres", User: u.User, Host: u.Host, Path: u.Path}
	pass := url.Values{}
	for k, v := range q {
		switch {
		case sqlurl.Ours(k):
		case strings.HasPrefix(k, "pool_"):
			return nil, fmt.Errorf("%w: postgres URL: %s is a pgxpool setting, and lease pools its connections with database/sql: use max_conns and max_idle_conns", lease.ErrInvalid, k)
		default:
			pass[k] = v
		}
	}
	// pgx reads the query as libpq does, where '+' is a plus, not a
	// space: Encode's '+' for a space would reach the server as a '+'
	// (options=-c+work_mem=8MB). Encode writes a '+' of a value as %2B,
	// so every '+' left is a space.
	out.RawQuery = strings.ReplaceAll(pass.Encode(), "+", "%20")
	cfg, err := pgx.ParseConfig(out.String())
	if err != nil {
		return nil, fmt.Errorf("%w: postgres URL: %s", lease.ErrInvalid, parseError(err, u))
	}
	for k := range pass {
		if _, setting := cfg.RuntimeParams[k]; !setting {
			continue // pgx read it
		}
		switch {
		case libpqOnly[k]:
			return nil, fmt.Errorf("%w: postgres URL: %s is a libpq keyword that pgx, the driver lease uses, does not implement: leave it out", lease.ErrInvalid, k)
		case !settingName.MatchString(k):
			return nil, fmt.Errorf("%w: postgres URL: unknown query parameter %q: not a libpq keyword, nor a PostgreSQL setting's name", lease.ErrInvalid, k)
		}
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
	secrets := u.Query()["password"]
	if pw, ok := u.User.Password(); ok {
		secrets = append(secrets, pw)
	}
	for _, pw := range secrets {
		if pw != "" && strings.Contains(msg, pw) {
			return "pgx refused the connection settings (its message quoted the password, so it is withheld)"
		}
	}
	return msg
}
