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
	"github.com/leasekit/lease/backend/sql/internal/sqltest"
	"github.com/leasekit/lease/internal/testenv"
)

// withParams is raw with the query parameters kv (name, value, ...) set.
func withParams(t *testing.T, raw string, kv ...string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for i := 0; i < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// exec runs statements on LEASE_TEST_POSTGRES on a connection of its own.
func exec(t *testing.T, raw string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("pgx", raw)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// TestURLPgxSettings: what pgx's own parser understands reaches it (the
// query execution mode, its caches, a Unix socket directory given as a
// host, a password as a parameter), and the Locker's own parameters never
// reach the server.
func TestURLPgxSettings(t *testing.T) {
	u, _ := url.Parse("postgres:///prod?host=/var/run/postgresql&port=5433&user=app&password=Hunter2&default_query_exec_mode=exec&statement_cache_capacity=0&sslmode=disable&max_conns=4&autocreate=false&search_path=jobs")
	cfg, err := config(u, u.Query())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "/var/run/postgresql" || cfg.Port != 5433 || cfg.User != "app" || cfg.Password != "Hunter2" || cfg.Database != "prod" ||
		cfg.StatementCacheCapacity != 0 || cfg.DefaultQueryExecMode.String() != "exec" {
		t.Errorf("config = host %q port %d user %q db %q cache %d mode %v", cfg.Host, cfg.Port, cfg.User, cfg.Database, cfg.StatementCacheCapacity, cfg.DefaultQueryExecMode)
	}
	if len(cfg.RuntimeParams) != 1 || cfg.RuntimeParams["search_path"] != "jobs" {
		t.Errorf("run-time settings sent to the server: %v, want only search_path", cfg.RuntimeParams)
	}
}

// TestURLsRefusedWithoutThePassword: pgx's refusals of a URL are
// ErrInvalid, and show no password, given in the user information or as a
// parameter.
func TestURLsRefusedWithoutThePassword(t *testing.T) {
	for raw, want := range map[string]string{
		"postgres://app:Hunter2@db/prod?sslmode=sometimes":                   "sslmode",
		"postgres://app@db/prod?password=Hunter2&sslmode=sometimes":          "sslmode",
		"postgres://app:Hunter2@db/prod?connect_timeout=Hunter2":             "withheld",
		"postgres://app@db/prod?password=Hunter2&connect_timeout=Hunter2":    "withheld",
		"postgres://app:Hunter2@db/prod?default_query_exec_mode=sometimes":   "default_query_exec_mode",
		"postgres://app:Hunter2@db/prod?pool_health_check_period=1s":         "pgxpool setting",
		"postgres://app:Hunter2@db/prod?target_session_attrs=any-but-mine":   "target_session_attrs",
		"postgres://app:Hunter2@db/prod?search_path=a&search_path=b":         "2 times",
		"postgresql://app:Hunter2@db/prod?table=pg_temp.leases":              "temporary",
		"postgresql://app:Hunter2@db/prod?max_conns=4&pool_max_conns=4":      "same setting",
		"postgresql://app:Hunter2@db/prod?max_conns=2&max_idle_conns=3":      "max_idle_conns",
		"postgresql://app:Hunter2@db/prod?statement_cache_capacity=lots&x=1": "statement_cache_capacity",
	} {
		l, err := Open(context.Background(), raw)
		if l != nil {
			l.Close()
		}
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s) = %v, want ErrInvalid saying %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "Hunter2") {
			t.Errorf("Open(%s) = %v: the password shows", raw, err)
		}
		if want == "withheld" {
			continue // lease.Open shows the URL, whose connect_timeout is the password
		}
		if _, err := lease.Open(context.Background(), raw); err != nil && strings.Contains(err.Error(), "Hunter2") {
			t.Errorf("lease.Open(%s) = %v: the password shows", raw, err)
		}
	}
}

// TestRefusedSettingIsInvalid: a run-time setting the server refuses at
// connect (unknown, a bad value, one that cannot be set then) fails Open
// with ErrInvalid naming it.
func TestRefusedSettingIsInvalid(t *testing.T) {
	raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
	for _, kv := range [][2]string{
		{"no_such_setting_xyz", "1"},
		{"statement_timeout", "soon"},
		{"shared_buffers", "1GB"},
	} {
		l, err := Open(t.Context(), withParams(t, raw, "table", "lease_url_refused", kv[0], kv[1]))
		if err == nil {
			l.Close()
			t.Errorf("Open with %s=%s succeeded", kv[0], kv[1])
			continue
		}
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("Open with %s=%s: %v; want ErrInvalid naming it", kv[0], kv[1], err)
		}
	}
}

// TestSearchPathWithTemporarySchema: a search_path that puts pg_temp
// first would make an unqualified CREATE TABLE make a temporary table,
// which each session has its own copy of. Open must refuse it (with
// ErrInvalid saying it is temporary, on a pool of one connection), and no
// two Lockers of the URL may both hold a name. A permanent table that the
// search_path finds after pg_temp is fine, and named with its schema.
func TestSearchPathWithTemporarySchema(t *testing.T) {
	raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
	ctx := t.Context()
	const table = "lease_url_sp_temp"
	exec(t, raw, "DROP TABLE IF EXISTS public."+table+", public."+table+"_marks")
	for _, sp := range []string{"pg_temp", "pg_temp,public", `"$user",pg_temp,public`} {
		_, err := Open(ctx, withParams(t, raw, "table", table, "search_path", sp, "max_conns", "1"))
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "temporary") {
			t.Errorf("search_path=%s, one connection: Open = %v, want ErrInvalid saying the table is temporary", sp, err)
		}
		var held []*sqllease.Locker
		for range 2 {
			l, err := Open(ctx, withParams(t, raw, "table", table, "search_path", sp))
			if err != nil {
				continue
			}
			defer l.Close()
			if _, err := l.Acquire(ctx, "job", lease.NewOwner(), time.Minute); err == nil {
				held = append(held, l)
			}
		}
		if len(held) > 1 {
			t.Errorf("search_path=%s: two Lockers both acquired one name", sp)
		}
	}
	// The table exists in public: found through pg_temp,public, and the
	// statements name public's, so a Locker without the search_path sees
	// the same tenure.
	ddl, err := sqllease.Schema(sqllease.PostgreSQL, "public."+table)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, raw, ddl)
	defer exec(t, raw, "DROP TABLE IF EXISTS public."+table+", public."+table+"_marks")
	sp, err := Open(ctx, withParams(t, raw, "table", table, "search_path", "pg_temp,public"))
	if err != nil {
		t.Fatalf("search_path=pg_temp,public with public.%s: %v", table, err)
	}
	defer sp.Close()
	plain, err := Open(ctx, withParams(t, raw, "table", "public."+table))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	held, err := sp.Acquire(ctx, "job", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := plain.Inspect(ctx, "job"); err != nil || got.Token != held.Token {
		t.Errorf("the tenure taken through the search_path: Inspect on public.%s = %v, %v; want %v", table, got, err, held)
	}
	if err := sp.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
}

// TestSearchPathFindsTheTable: a search_path naming a schema of the
// application's finds the lease table there (created there when
// missing), and a Locker that names the table with its schema shares its
// tenures; a renewal and a release go through the search_path Locker.
func TestSearchPathFindsTheTable(t *testing.T) {
	raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
	ctx := t.Context()
	exec(t, raw, "DROP SCHEMA IF EXISTS lease_url_app CASCADE", "CREATE SCHEMA lease_url_app")
	defer exec(t, raw, "DROP SCHEMA IF EXISTS lease_url_app CASCADE")
	sp, err := Open(ctx, withParams(t, raw, "table", "lease_url_sp", "search_path", "lease_url_app,public", "application_name", "lease-url-test", "statement_timeout", "5s"))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	qualified, err := Open(ctx, withParams(t, raw, "table", "lease_url_app.lease_url_sp", "autocreate", "false"))
	if err != nil {
		t.Fatalf("the table was not created in the search_path's schema: %v", err)
	}
	defer qualified.Close()
	held, err := sp.Acquire(ctx, "job", "a", time.Minute)
	if err == nil {
		held, err = sp.Renew(ctx, held, 2*time.Minute)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := qualified.Acquire(ctx, "job", "b", time.Minute); !errors.Is(err, lease.ErrHeld) {
		t.Errorf("Acquire on lease_url_app.lease_url_sp while held through the search_path: %v, want ErrHeld", err)
	}
	if err := sp.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
}

// TestOpenWithPgxModesAndSocket: the Locker works with pgx's other query
// execution modes and through a Unix socket named as postgres:///db?host=
// (when the server has one in /var/run/postgresql).
func TestOpenWithPgxModesAndSocket(t *testing.T) {
	raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
	ctx := t.Context()
	var urls []string
	for _, mode := range []string{"simple_protocol", "exec", "cache_describe", "describe_exec"} {
		urls = append(urls, withParams(t, raw, "table", "lease_url_modes", "default_query_exec_mode", mode))
	}
	if _, err := os.Stat("/var/run/postgresql/.s.PGSQL.5432"); err == nil {
		u, _ := url.Parse(raw)
		urls = append(urls, withParams(t, "postgres://"+u.Path, "table", "lease_url_modes", "host", "/var/run/postgresql", "user", u.User.Username(), "pool_max_conns", "2"))
	} else {
		t.Log("no socket in /var/run/postgresql: host=/dir is checked by TestURLPassThrough only")
	}
	defer exec(t, raw, "DROP TABLE IF EXISTS lease_url_modes, lease_url_modes_marks")
	for _, u := range urls {
		sqltest.CycleThroughURL(ctx, t, u, "modes", "o'wner \\")
	}
}
