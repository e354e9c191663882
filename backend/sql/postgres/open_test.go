package postgreslease

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	sqllease "github.com/leasekit/lease/backend/sql"
	"github.com/leasekit/lease/internal/testenv"
)

// TestURLTranslation checks what a URL becomes for pgx.
func TestURLTranslation(t *testing.T) {
	u, _ := url.Parse("postgresql://app:p%40ss@db:5433/prod?sslmode=disable&table=x&application_name=jobs&connect_timeout=7")
	cfg, err := config(u, u.Query())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "db" || cfg.Port != 5433 || cfg.User != "app" || cfg.Password != "p@ss" || cfg.Database != "prod" ||
		cfg.RuntimeParams["application_name"] != "jobs" || cfg.ConnectTimeout != 7*time.Second || cfg.TLSConfig != nil {
		t.Errorf("config = host %q port %d user %q db %q params %v timeout %s tls %v",
			cfg.Host, cfg.Port, cfg.User, cfg.Database, cfg.RuntimeParams, cfg.ConnectTimeout, cfg.TLSConfig != nil)
	}
	if _, ok := cfg.RuntimeParams["table"]; ok {
		t.Error("the table parameter reached the driver")
	}
}

// TestURLPassThrough: every parameter that is not the Locker's reaches pgx
// as in a libpq URL: libpq keywords configure the connection (a Unix
// socket directory as host), others become run-time settings.
func TestURLPassThrough(t *testing.T) {
	u, _ := url.Parse("postgres:///prod?host=/var/run/postgresql&user=app&search_path=jobs,public&statement_timeout=5000&target_session_attrs=read-write&table=x&max_conns=4")
	cfg, err := config(u, u.Query())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "/var/run/postgresql" || cfg.User != "app" || cfg.Database != "prod" ||
		cfg.RuntimeParams["search_path"] != "jobs,public" || cfg.RuntimeParams["statement_timeout"] != "5000" || cfg.ValidateConnect == nil {
		t.Errorf("config = host %q user %q db %q params %v validate %v", cfg.Host, cfg.User, cfg.Database, cfg.RuntimeParams, cfg.ValidateConnect != nil)
	}
	for _, k := range []string{"table", "max_conns", "target_session_attrs"} {
		if _, ok := cfg.RuntimeParams[k]; ok {
			t.Errorf("%s reached the server as a run-time setting", k)
		}
	}
	// libpq's dbname and options, an extension's setting; spaces
	// written either way and a '+' reach pgx as they are.
	u, _ = url.Parse("postgres://h?dbname=other&options=-c%20work_mem%3D8MB&auto_explain.log_min_duration=250&application_name=nightly+jobs%2Bmore")
	if cfg, err = config(u, u.Query()); err != nil {
		t.Fatal(err)
	}
	if cfg.Database != "other" || cfg.RuntimeParams["options"] != "-c work_mem=8MB" ||
		cfg.RuntimeParams["auto_explain.log_min_duration"] != "250" || cfg.RuntimeParams["application_name"] != "nightly jobs+more" {
		t.Errorf("config = db %q params %v", cfg.Database, cfg.RuntimeParams)
	}
	if _, ok := cfg.RuntimeParams["dbname"]; ok {
		t.Error("dbname reached the server as a run-time setting")
	}
}

// TestSettingValuesArriveAsWritten: a value with a space and a '+'
// reaches the server as the URL wrote it (pgx reads '+' as a plus, as
// libpq does, so a space must not reach it as one).
func TestSettingValuesArriveAsWritten(t *testing.T) {
	raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
	u, _ := url.Parse(raw)
	q := u.Query()
	q.Set("application_name", "lease prod+url")
	q.Set("search_path", "public")
	c, err := connector(u, q)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()
	var app, path string
	err = db.QueryRowContext(t.Context(), "SELECT current_setting('application_name'), current_setting('search_path')").Scan(&app, &path)
	if err != nil || app != "lease prod+url" || path != "public" {
		t.Errorf("on the connection: application_name %q, search_path %q, %v; want lease prod+url, public", app, path, err)
	}
}

// TestOpenRefuses checks the URLs Open refuses before connecting.
func TestOpenRefuses(t *testing.T) {
	ctx := context.Background()
	for _, bad := range []string{
		"postgres://u@h/db?pool_max_conns=3&max_conns=4",
		"postgres://u@h/db?pool_min_conns=3",
		// Refused before connecting (h does not resolve): misspellings
		// of the Locker's own parameters, libpq keywords pgx does not
		// implement, names no setting can have.
		"postgres://u@h/db?tabel=x",
		"postgres://u@h/db?maxConns=4",
		"postgres://u@h/db?max-idle-conns=4",
		"postgres://u@h/db?keepalives=1",
		"postgres://u@h/db?gssencmode=disable",
		"postgres://u@h/db?search-path=public",
		"postgres://u@h/db?a%3Db=1",
		"postgres://u@h/db?max_conns=0",
		"postgres://u@h/db?search_path=a&search_path=b",
		"postgres://u@h/db?table=no-dash",
		"postgres://u@h/db?table=pg_temp.leases",
		"postgres://u@h/db?table=pg_temp_4.leases",
		"postgres://u@h/db?autocreate=maybe",
		"postgres://u@h/db?sslmode=sometimes",
		"postgres://u@h:99999/db",
		"postgres://u@h/db%zz",
	} {
		if l, err := Open(ctx, bad); !errors.Is(err, lease.ErrInvalid) || !strings.HasPrefix(err.Error(), "lease/sql: open: ") {
			if l != nil {
				l.Close()
			}
			t.Errorf("Open(%s): %v, want ErrInvalid prefixed lease/sql: open:", bad, err)
		}
	}
}

// TestLeaseOpen checks that the schemes are registered and open a Locker
// on the server.
func TestLeaseOpen(t *testing.T) {
	raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
	ctx := context.Background()
	u, _ := url.Parse(raw)
	q := u.Query()
	q.Set("table", "lease_open_test")
	u.RawQuery = q.Encode()
	for _, scheme := range []string{"postgres", "postgresql"} {
		u.Scheme = scheme
		l, err := lease.Open(ctx, u.String())
		if err != nil {
			t.Fatalf("lease.Open(%s): %v", u, err)
		}
		sl := l.(*sqllease.Locker)
		if sl.Dialect() != sqllease.PostgreSQL || sl.Table() != "lease_open_test" {
			t.Errorf("lease.Open(%s): dialect %v table %q", u, sl.Dialect(), sl.Table())
		}
		got, err := l.Acquire(ctx, "open-"+scheme, lease.NewOwner(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx, got); err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	db, err := sql.Open("pgx", raw)
	if err == nil {
		_, err = db.Exec("DROP TABLE IF EXISTS lease_open_test, lease_open_test_marks")
		db.Close()
	}
	if err != nil {
		t.Error(err)
	}
}

// TestOpenProductionURLs opens LEASE_TEST_POSTGRES with the settings a
// production URL carries (a search_path, a statement_timeout, pgxpool's
// pool_max_conns) and, when the server has a Unix socket in
// /var/run/postgresql, through it; a setting the server does not know
// fails Open, naming it.
func TestOpenProductionURLs(t *testing.T) {
	raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
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
	urls := []string{with(*base, "table", "lease_prod_url", "search_path", "public", "statement_timeout", "5000", "pool_max_conns", "4")}
	if _, err := os.Stat("/var/run/postgresql/.s.PGSQL.5432"); err == nil {
		sock := *base
		sock.Host = ""
		urls = append(urls, with(sock, "table", "lease_prod_url", "host", "/var/run/postgresql"))
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
	l, err := Open(ctx, with(*base, "table", "lease_prod_url", "no_such_setting_xyz", "1"))
	if err == nil {
		l.Close()
		t.Fatal("Open with a setting the server does not know succeeded")
	}
	if !strings.Contains(err.Error(), "no_such_setting_xyz") {
		t.Fatalf("Open with an unknown setting: %v; want the error to name it", err)
	}
}
