package mysqllease

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/sql/internal/sqltest"
	"github.com/leasekit/lease/internal/testenv"
)

// TestURLAddressForms: the server's address as a URL host, as a DSN's
// unix(/path) or tcp(host:port), or as socket=/path.
func TestURLAddressForms(t *testing.T) {
	for raw, want := range map[string][3]string{
		"mysql://app:pw@db.internal/prod":                            {"tcp", "db.internal:3306", "prod"},
		"mysql://app:pw@[::1]:3307/prod":                             {"tcp", "[::1]:3307", "prod"},
		"mysql://app:pw@unix(/run/mysqld/mysqld.sock)/prod":          {"unix", "/run/mysqld/mysqld.sock", "prod"},
		"mysql://app@unix(/tmp/my%20dir/mysqld.sock)/prod?charset=x": {"unix", "/tmp/my dir/mysqld.sock", "prod"},
		"mysql://app:pw@tcp(db.internal)/prod":                       {"tcp", "db.internal:3306", "prod"},
		"mysql://app@/prod?socket=/run/mysqld/mysqld.sock":           {"unix", "/run/mysqld/mysqld.sock", "prod"},
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		q := u.Query()
		q.Del("charset")
		cfg, err := config(u, q)
		if err != nil {
			t.Errorf("config(%s): %v", raw, err)
			continue
		}
		if got := [3]string{cfg.Net, cfg.Addr, cfg.DBName}; got != want {
			t.Errorf("config(%s) = %q, want %q", raw, got, want)
		}
		if cfg.User != "app" || !cfg.InterpolateParams {
			t.Errorf("config(%s): user %q, interpolateParams %v", raw, cfg.User, cfg.InterpolateParams)
		}
	}
}

// TestURLDriverSettings: what go-sql-driver's DSN parser understands
// reaches it, with TLS checked against the URL's host (not the parser's
// default address), and a TLS configuration registered by name usable.
func TestURLDriverSettings(t *testing.T) {
	u, _ := url.Parse("mysql://app:pw@db.example.com:3306/prod?tls=true&charset=utf8mb4&collation=utf8mb4_bin&loc=UTC&parseTime=true&readTimeout=2s&writeTimeout=3s&timeout=4s&maxAllowedPacket=1048576&sql_mode=TRADITIONAL&table=x&max_conns=4")
	cfg, err := config(u, u.Query())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS == nil || cfg.TLS.ServerName != "db.example.com" || cfg.TLS.InsecureSkipVerify {
		t.Errorf("tls=true: %+v, want the certificate checked for db.example.com", cfg.TLS)
	}
	if cfg.Collation != "utf8mb4_bin" || !cfg.ParseTime || cfg.ReadTimeout != 2*time.Second || cfg.WriteTimeout != 3*time.Second ||
		cfg.Timeout != 4*time.Second || cfg.MaxAllowedPacket != 1<<20 || cfg.Loc != time.UTC {
		t.Errorf("driver settings: %+v", cfg)
	}
	if len(cfg.Params) != 1 || cfg.Params["sql_mode"] != "TRADITIONAL" {
		t.Errorf("system variables: %v, want only sql_mode", cfg.Params)
	}
	if err := mysql.RegisterTLSConfig("lease-url-test", &tls.Config{MinVersion: tls.VersionTLS13}); err != nil {
		t.Fatal(err)
	}
	defer mysql.DeregisterTLSConfig("lease-url-test")
	u, _ = url.Parse("mysql://app:pw@db.example.com/prod?tls=lease-url-test")
	if cfg, err = config(u, u.Query()); err != nil {
		t.Fatal(err)
	}
	if cfg.TLS == nil || cfg.TLS.MinVersion != tls.VersionTLS13 || cfg.TLS.ServerName != "db.example.com" {
		t.Errorf("tls=lease-url-test: %+v", cfg.TLS)
	}
}

// TestURLsRefused: what the Locker cannot work with is refused before
// connecting, with ErrInvalid saying why and never the password.
func TestURLsRefused(t *testing.T) {
	ctx := context.Background()
	for raw, want := range map[string]string{
		"mysql://root:Hunter2@127.0.0.1:3306/test?autocommit=0":                  "autocommit=0",
		"mysql://root:Hunter2@127.0.0.1:3306/test?autocommit=OFF":                "never committed",
		"mysql://root:Hunter2@127.0.0.1:3306/test?password=Hunter2":              "user information",
		"mysql://root:Hunter2@127.0.0.1:3306/test?charset=gbk":                   "charset gbk",
		"mysql://root:Hunter2@127.0.0.1:3306/test?charset=utf8mb4,sjis":          "charset sjis",
		"mysql://root:Hunter2@127.0.0.1:3306/test?collation=gbk_chinese_ci":      "collation",
		"mysql://root:Hunter2@127.0.0.1:3306/test?tls=no-such-config":            "mysql.RegisterTLSConfig",
		"mysql://root:Hunter2@unix(mysqld.sock)/test":                            "absolute path",
		"mysql://root:Hunter2@unix(/run/mysqld/mysqld.sock/test":                 "closing parenthesis",
		"mysql://root:Hunter2@unix(/run/mysqld/mysqld.sock)/test?socket=/x.sock": "socket twice",
		"mysql://root:Hunter2@unix(/run/mysqld/mysqld.sock)":                     "names no database",
		"mysql://root:Hunter2@unix(/run/mysqld/mysqld.sock)/a/b":                 "names no database",
		"mysql://root:Hunter2@tcp(127.0.0.1:3306)/test":                          "host:port in a URL",
	} {
		l, err := Open(ctx, raw)
		if l != nil {
			l.Close()
		}
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s) = %v, want ErrInvalid saying %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "Hunter2") {
			t.Errorf("Open(%s) = %v: the password shows", raw, err)
		}
		if _, err := lease.Open(ctx, raw); err != nil && strings.Contains(err.Error(), "Hunter2") {
			t.Errorf("lease.Open(%s) = %v: the password shows", raw, err)
		}
	}
}

// TestOpenThroughDSNForms opens LEASE_TEST_MYSQL through the server's Unix
// socket written as a DSN writes it (when the server has one at
// /run/mysqld/mysqld.sock) and with the driver settings of production
// DSNs, and takes, renews and releases a lease on each; a system variable
// the server does not know, or a bad value for one, fails Open with
// ErrInvalid naming it.
func TestOpenThroughDSNForms(t *testing.T) {
	raw := testenv.Lookup(t, "LEASE_TEST_MYSQL")
	ctx := t.Context()
	base, _ := url.Parse(raw)
	const table = "lease_dsn_forms"
	with := func(u url.URL, kv ...string) string {
		q := u.Query()
		q.Set("table", table)
		for i := 0; i < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	urls := []string{with(*base, "parseTime", "true", "loc", "Local", "charset", "utf8mb4", "collation", "utf8mb4_unicode_ci",
		"columnsWithAlias", "true", "multiStatements", "true", "interpolateParams", "false", "autocommit", "1",
		"time_zone", "'+05:00'", "sql_mode", "'ANSI_QUOTES,PIPES_AS_CONCAT,NO_BACKSLASH_ESCAPES'")}
	if _, err := os.Stat("/run/mysqld/mysqld.sock"); err == nil {
		sock := *base
		sock.Host, sock.Path = "unix(", "/run/mysqld/mysqld.sock)"+base.Path
		urls = append(urls, with(sock))
	} else {
		t.Log("no /run/mysqld/mysqld.sock here: unix(...) is checked by TestURLAddressForms only")
	}
	defer func() {
		c, err := connector(base, url.Values{})
		if err != nil {
			t.Fatal(err)
		}
		db := sql.OpenDB(c)
		defer db.Close()
		if _, err := db.Exec("DROP TABLE IF EXISTS " + table); err != nil {
			t.Error(err)
		}
	}()
	for _, u := range urls {
		sqltest.CycleThroughURL(ctx, t, u, "dsn-forms", "o'wner \\ 'x")
	}
	for _, kv := range [][2]string{{"no_such_variable_xyz", "1"}, {"innodb_lock_wait_timeout", "'soon'"}} {
		l, err := lease.Open(ctx, with(*base, kv[0], kv[1]))
		if err == nil {
			l.Close()
			t.Fatalf("lease.Open with %s=%s succeeded", kv[0], kv[1])
		}
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("lease.Open with %s=%s: %v; want ErrInvalid naming it", kv[0], kv[1], err)
		}
	}
}
