package postgreslease

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
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

// TestOpenRefuses checks the URLs Open refuses before connecting.
func TestOpenRefuses(t *testing.T) {
	ctx := context.Background()
	for _, bad := range []string{
		"postgres://u@h/db?pool_max_conns=3",
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
		_, err = db.Exec("DROP TABLE IF EXISTS lease_open_test")
		db.Close()
	}
	if err != nil {
		t.Error(err)
	}
}
