package mysqllease

import (
	"context"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
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
// go-sql-driver's DSN parser, as in a DSN: tls (true, false, skip-verify,
// preferred, or a name given to mysql.RegisterTLSConfig), timeout,
// readTimeout, charset, collation, loc, parseTime, ... configure the
// connection, and any other is a system variable set at connect
// (sql_mode, time_zone, innodb_lock_wait_timeout, ...), as SET name =
// value with the value as written: quote a string that is not a plain
// word, and escape a '+', which a URL query reads as a space
// (time_zone='%2B00:00'). The server refuses a variable it does not know,
// or a bad value: Open then fails with an error matching lease.ErrInvalid
// that names it. Refused the same way before connecting: a name no
// system variable can have, a misspelling of the Locker's own parameters
// (tabel, maxConns), and, as the Locker cannot work with them: clientFoundRows
// (changes the counts it reads), autocommit other than 1 (its writes
// would never commit), password= (the driver would SET PASSWORD), and
// character sets in which escaping is unsafe (big5, sjis, cp932, gbk,
// gb18030), since interpolateParams is always on.
//
// The server is the URL's host (port 3306 by default), or a Unix socket:
// socket=/run/mysqld/mysqld.sock, or as a DSN writes it,
// mysql://user:pass@unix(/run/mysqld/mysqld.sock)/db. A DSN's
// tcp(host:port) is taken as host:port when url.Parse lets it through
// (without a port); with one it does not parse, and the error says to
// write host:port.
var dialect = sqlurl.Dialect{
	Dialect:   sqllease.MySQL,
	PassAll:   true,
	Connector: connector,
}

// variableName matches the name of a system variable (and of a MySQL 8
// component's, validate_password.length); go-sql-driver writes the name
// into its SET statement as it is.
var variableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

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
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: mysql URL: %v", lease.ErrInvalid, err)
	}
	return settingsConnector{c}, nil
}

// settingsConnector is a go-sql-driver connector whose Connect fails with
// an error matching lease.ErrInvalid when the server refuses a system
// variable that the URL sets (go-sql-driver sends them as SET at
// connect): no connection of the URL can succeed, and the error names
// the variable.
type settingsConnector struct{ sqldriver.Connector }

func (c settingsConnector) Connect(ctx context.Context) (sqldriver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	var me *mysql.MySQLError
	if err != nil && errors.As(err, &me) {
		switch me.Number {
		case 1193, // ER_UNKNOWN_SYSTEM_VARIABLE
			1229, // ER_GLOBAL_VARIABLE
			1231, // ER_WRONG_VALUE_FOR_VAR
			1232, // ER_WRONG_TYPE_FOR_VAR
			1238, // ER_INCORRECT_GLOBAL_LOCAL_VAR (read only)
			1621: // ER_VARIABLE_IS_READONLY
			return nil, fmt.Errorf("%w: mysql URL: the server refused a system variable that the URL sets at connect: %w", lease.ErrInvalid, err)
		}
	}
	return conn, err
}

// config turns mysql://user:pass@host:port/db into a go-sql-driver
// configuration with interpolateParams on (one round trip per statement)
// and a logger that drops what the driver would print. The address may
// also be a Unix socket, as socket=/path/mysqld.sock or as a DSN writes
// it, mysql://user:pass@unix(/path/mysqld.sock)/db; and a DSN's
// tcp(host:port) is taken for host:port.
func config(u *url.URL, q url.Values) (*mysql.Config, error) {
	network, addr, db, err := address(u, q)
	if err != nil {
		return nil, err
	}
	pass := url.Values{}
	for k, v := range q {
		if !sqlurl.Ours(k) && k != "socket" {
			pass[k] = v
		}
	}
	if err := refused(q); err != nil {
		return nil, err
	}
	// The DSN parser reads the parameters, and resolves tls for the
	// address (the name its certificate must have); the URL gives the
	// user, password and database, which the DSN could not carry intact.
	// interpolateParams goes through the parser too, which refuses it
	// with a collation whose multibyte characters can hide a quote.
	pass.Set("interpolateParams", "true")
	cfg, err := mysql.ParseDSN(network + "(" + addr + ")/?" + pass.Encode())
	if err != nil {
		if v := q.Get("tls"); v != "" && strings.Contains(err.Error(), "config name") {
			return nil, fmt.Errorf("%w: mysql URL: tls=%q is not true, false, skip-verify, preferred or a name given to mysql.RegisterTLSConfig", lease.ErrInvalid, v)
		}
		return nil, fmt.Errorf("%w: mysql URL parameters: %v", lease.ErrInvalid, err)
	}
	for k := range cfg.Params {
		if !variableName.MatchString(k) {
			return nil, fmt.Errorf("%w: mysql URL: unknown query parameter %q: not a go-sql-driver setting, nor a system variable's name", lease.ErrInvalid, k)
		}
	}
	cfg.Logger = &mysql.NopLogger{}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.DBName = db
	return cfg, nil
}

// address is where u says the server is: "tcp" and host:port (port 3306
// by default), or "unix" and a socket's path; and the database name.
func address(u *url.URL, q url.Values) (network, addr, db string, err error) {
	db = strings.TrimPrefix(u.Path, "/")
	host := u.Host
	switch {
	case host == "unix(":
		// url.Parse reads mysql://u@unix(/run/mysqld/mysqld.sock)/db as
		// the host "unix(" and the path "/run/mysqld/mysqld.sock)/db".
		sock, rest, ok := strings.Cut(u.Path, ")")
		if !ok {
			return "", "", "", fmt.Errorf("%w: mysql URL: unix( has no closing parenthesis (want mysql://user@unix(/path/mysqld.sock)/db)", lease.ErrInvalid)
		}
		network, addr, db = "unix", sock, strings.TrimPrefix(rest, "/")
	case strings.HasPrefix(host, "unix("):
		return "", "", "", fmt.Errorf("%w: mysql URL: unix(...) holds no absolute path to the server's Unix socket (want mysql://user@unix(/path/mysqld.sock)/db)", lease.ErrInvalid)
	case strings.HasPrefix(host, "tcp(") && strings.HasSuffix(host, ")"):
		host = host[len("tcp(") : len(host)-1]
		fallthrough
	default:
		if host == "" {
			host = "127.0.0.1"
		}
		if _, port, err := net.SplitHostPort(host); err != nil {
			host = net.JoinHostPort(strings.Trim(host, "[]"), "3306")
		} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", "", "", fmt.Errorf("%w: mysql URL: invalid port %q", lease.ErrInvalid, port)
		}
		network, addr = "tcp", host
	}
	if sock := q.Get("socket"); sock != "" {
		switch {
		case network == "unix":
			return "", "", "", fmt.Errorf("%w: mysql URL gives the socket twice, as unix(...) and socket=: give one", lease.ErrInvalid)
		case !strings.HasPrefix(sock, "/"):
			return "", "", "", fmt.Errorf("%w: socket=%q is not an absolute path to the server's Unix socket", lease.ErrInvalid, sock)
		}
		network, addr = "unix", sock
	}
	if strings.ContainsAny(addr, "()") {
		return "", "", "", fmt.Errorf("%w: mysql URL: the address %q has a parenthesis", lease.ErrInvalid, addr)
	}
	if db == "" || strings.Contains(db, "/") {
		return "", "", "", fmt.Errorf("%w: mysql URL names no database (want mysql://user:pass@host:3306/dbname)", lease.ErrInvalid)
	}
	return network, addr, db, nil
}

// unsafeCharsets are the character sets in which the second byte of a
// character can be a backslash (0x5c), so that the driver's escaping of
// the parameters it interpolates can be undone.
var unsafeCharsets = map[string]bool{"big5": true, "sjis": true, "cp932": true, "gbk": true, "gb18030": true}

// refused is the error for a parameter go-sql-driver would take but that
// would break the Locker, nil if there is none.
func refused(q url.Values) error {
	if q.Has("clientFoundRows") {
		return fmt.Errorf("%w: mysql URL: clientFoundRows changes the rows-affected counts the Locker reads; leave it out", lease.ErrInvalid)
	}
	if v, ok := q["autocommit"]; ok && !slices.Contains([]string{"1", "on", "true"}, strings.ToLower(strings.Trim(v[0], "'\""))) {
		return fmt.Errorf("%w: mysql URL: autocommit=%s leaves every statement of the Locker in a transaction that is never committed: other connections would not see its leases and would wait on its locks", lease.ErrInvalid, v[0])
	}
	for _, k := range []string{"password", "passwd", "pwd"} {
		if q.Has(k) {
			// The driver would send SET password = ..., which changes it.
			return fmt.Errorf("%w: mysql URL: the password goes in the user information (mysql://user:password@host/db), not in parameter %s", lease.ErrInvalid, k)
		}
	}
	for _, cs := range strings.Split(q.Get("charset"), ",") {
		if unsafeCharsets[strings.ToLower(strings.TrimSpace(cs))] {
			return fmt.Errorf("%w: mysql URL: charset %s is not safe with the interpolated parameters the Locker uses (a multibyte character can end in a backslash): use utf8mb4", lease.ErrInvalid, cs)
		}
	}
	return nil
}
