package mysqllease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leasekit/lease"
	sqllease "github.com/leasekit/lease/backend/sql"
	"github.com/leasekit/lease/backend/sql/internal/classify"
	"github.com/leasekit/lease/internal/testenv"
)

// TestURLTranslation checks what a URL becomes for go-sql-driver.
func TestURLTranslation(t *testing.T) {
	u, _ := url.Parse("mysql://app:p%40ss@db/prod?tls=skip-verify&timeout=3s&table=x")
	cfg, err := config(u, u.Query())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "app" || cfg.Passwd != "p@ss" || cfg.Addr != "db:3306" || cfg.DBName != "prod" ||
		!cfg.InterpolateParams || cfg.TLSConfig != "skip-verify" || cfg.Timeout != 3*time.Second {
		t.Errorf("config = %+v", cfg)
	}
	if _, ok := cfg.Logger.(*mysql.NopLogger); !ok {
		t.Errorf("config's Logger is %T, want *mysql.NopLogger: the driver must not print to the program's stderr", cfg.Logger)
	}
	if len(cfg.Params) != 0 {
		t.Errorf("parameters reached the driver: %v", cfg.Params)
	}
	u, _ = url.Parse("mysql://app@/prod?socket=/run/mysqld/mysqld.sock&sql_mode=TRADITIONAL&readTimeout=2s")
	if cfg, err = config(u, u.Query()); err != nil {
		t.Fatal(err)
	}
	if cfg.Net != "unix" || cfg.Addr != "/run/mysqld/mysqld.sock" || cfg.Params["sql_mode"] != "TRADITIONAL" || cfg.ReadTimeout != 2*time.Second || !cfg.InterpolateParams {
		t.Errorf("a socket URL's config = %+v", cfg)
	}
}

// TestOpenRefuses checks the URLs Open refuses before connecting.
func TestOpenRefuses(t *testing.T) {
	ctx := context.Background()
	for _, bad := range []string{
		"mysql://root@127.0.0.1:3306/",
		"mysql://root@127.0.0.1:3306/test?clientFoundRows=true",
		"mysql://root@127.0.0.1:3306/test?socket=mysqld.sock",
		"mysql://root@127.0.0.1:3306/test?maxAllowedPacket=lots",
		"mysql://root@127.0.0.1:3306/test?timeout=1s&timeout=2s",
		"mysql://root@127.0.0.1:3306/test?tls=maybe",
		"mysql://root@127.0.0.1:3306/test?timeout=soon",
		"mysql://root@127.0.0.1:3306/test?table=no-dash",
		"mysql://root@127.0.0.1:3306/test?autocreate=maybe",
		"mysql://root@127.0.0.1:99999/test",
		// Misspellings of the Locker's own parameters, and names no
		// system variable has (go-sql-driver writes them into SET as
		// they are).
		"mysql://root@127.0.0.1:3306/test?tabel=x",
		"mysql://root@127.0.0.1:3306/test?maxConns=4",
		"mysql://root@127.0.0.1:3306/test?a%3Db=1",
		"mysql://root@127.0.0.1:3306/test?sql-mode=ANSI",
	} {
		if l, err := Open(ctx, bad); !errors.Is(err, lease.ErrInvalid) || !strings.HasPrefix(err.Error(), "lease/sql: open: ") {
			if l != nil {
				l.Close()
			}
			t.Errorf("Open(%s): %v, want ErrInvalid prefixed lease/sql: open:", bad, err)
		}
	}
}

// TestDeadlocksAreRetryable checks the classifier this package gives
// sqllease for go-sql-driver's errors, which expose their number in a
// struct field only.
func TestDeadlocksAreRetryable(t *testing.T) {
	for err, want := range map[error]bool{
		&mysql.MySQLError{Number: 1213}:                            true,
		fmt.Errorf("wrapped: %w", &mysql.MySQLError{Number: 1020}): true,
		&mysql.MySQLError{Number: 1062}:                            false, // duplicate key
		mysql.ErrInvalidConn:                                       false, // the outcome is unknown
		context.DeadlineExceeded:                                   false,
	} {
		if got := classify.Retryable(err); got != want {
			t.Errorf("classify.Retryable(%v) = %v, want %v", err, got, want)
		}
	}
}

// TestLeaseOpen checks that the scheme is registered and opens a Locker
// on the server.
func TestLeaseOpen(t *testing.T) {
	raw := testenv.Lookup(t, "LEASE_TEST_MYSQL")
	ctx := context.Background()
	u, _ := url.Parse(raw)
	u.RawQuery = "table=lease_open_test"
	l, err := lease.Open(ctx, u.String())
	if err != nil {
		t.Fatalf("lease.Open(%s): %v", u, err)
	}
	defer l.Close()
	sl := l.(*sqllease.Locker)
	if sl.Dialect() != sqllease.MySQL || sl.Table() != "lease_open_test" {
		t.Errorf("lease.Open(%s): dialect %v table %q", u, sl.Dialect(), sl.Table())
	}
	got, err := l.Acquire(ctx, "open", lease.NewOwner(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, got); err != nil {
		t.Fatal(err)
	}
	c, err := connector(u, url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()
	if _, err := db.Exec("DROP TABLE IF EXISTS lease_open_test"); err != nil {
		t.Error(err)
	}
}

// TestOpenProductionURLs opens LEASE_TEST_MYSQL with what production DSNs
// carry (driver settings and a system variable) and, when the server has
// a Unix socket at /run/mysqld/mysqld.sock, through it; a system variable
// the server does not know fails Open, naming it.
func TestOpenProductionURLs(t *testing.T) {
	raw := testenv.Lookup(t, "LEASE_TEST_MYSQL")
	ctx := t.Context()
	base, _ := url.Parse(raw)
	with := func(u url.URL, kv ...string) string {
		q := u.Query()
		for i := 0; i < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	urls := []string{with(*base, "table", "lease_prod_url", "readTimeout", "5s", "charset", "utf8mb4", "innodb_lock_wait_timeout", "5")}
	if _, err := os.Stat("/run/mysqld/mysqld.sock"); err == nil {
		urls = append(urls, with(*base, "table", "lease_prod_url", "socket", "/run/mysqld/mysqld.sock"))
	} else {
		t.Log("no /run/mysqld/mysqld.sock here: the socket is checked by TestURLTranslation only")
	}
	for _, u := range urls {
		l, err := Open(ctx, u)
		if err != nil {
			t.Fatalf("Open(%s): %v", u, err)
		}
		got, err := l.Acquire(ctx, "prod-url", lease.NewOwner(), time.Minute)
		if err == nil {
			err = l.Release(ctx, got)
		}
		l.Close()
		if err != nil {
			t.Fatalf("Open(%s), then Acquire and Release: %v", u, err)
		}
	}
	l, err := Open(ctx, with(*base, "table", "lease_prod_url", "no_such_variable_xyz", "1"))
	if err == nil {
		l.Close()
		t.Fatal("Open with a system variable the server does not know succeeded")
	}
	if !strings.Contains(err.Error(), "no_such_variable_xyz") {
		t.Fatalf("Open with an unknown system variable: %v; want the error to name it", err)
	}
}

// TestVariableValuesArriveAsWritten: system variables reach the server as
// the URL wrote them, quotes and an escaped '+' included.
func TestVariableValuesArriveAsWritten(t *testing.T) {
	raw := testenv.Lookup(t, "LEASE_TEST_MYSQL")
	u, _ := url.Parse(raw)
	u.RawQuery = "time_zone=%27%2B00:00%27&sql_mode=%27ANSI_QUOTES,TRADITIONAL%27"
	c, err := connector(u, u.Query())
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()
	var tz, mode string
	err = db.QueryRowContext(t.Context(), "SELECT @@time_zone, @@sql_mode").Scan(&tz, &mode)
	if err != nil || tz != "+00:00" || !strings.Contains(mode, "ANSI_QUOTES") {
		t.Errorf("on the connection: time_zone %q, sql_mode %q, %v; want +00:00 and ANSI_QUOTES", tz, mode, err)
	}
}
