package sqllease

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// TestOpenURLs checks the URL forms lease.Open accepts and refuses.
func TestOpenURLs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	// Absolute path, through lease.Open, with table and autocreate.
	abs := "sqlite://" + filepath.Join(dir, "a.db") + "?table=jobs_leases&autocreate=true&busy_timeout=1000"
	l, err := lease.Open(ctx, abs)
	if err != nil {
		t.Fatalf("lease.Open(%s): %v", abs, err)
	}
	if got := l.(*Locker).Table(); got != "jobs_leases" {
		t.Errorf("table = %q, want jobs_leases", got)
	}
	if _, err := l.Acquire(ctx, "x", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	l.Close()

	// Relative path, resolved against the working directory.
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	rel, err := Open(ctx, "sqlite:rel.db")
	if err != nil {
		t.Fatalf("Open(sqlite:rel.db): %v", err)
	}
	rel.Close()
	if _, err := os.Stat(filepath.Join(dir, "rel.db")); err != nil {
		t.Errorf("sqlite:rel.db did not make rel.db in the working directory: %v", err)
	}

	// autocreate=false on a missing table fails at Open, naming the problem.
	if _, err := Open(ctx, "sqlite://"+filepath.Join(dir, "b.db")+"?autocreate=false"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("autocreate=false on a new file: %v, want a missing-table error", err)
	}

	for _, bad := range []string{
		"sqlite::memory:",
		"sqlite://host/x.db",
		"sqlite:",
		"sqlite:///x.db?cache=shared",
		"sqlite:///x.db?autocreate=maybe",
		"sqlite:///x.db?busy_timeout=soon",
		"sqlite:///x.db?table=no-dash",
		"postgres://u@h/db?pool_max_conns=3",
		"mysql://root@127.0.0.1:3306/",
		"mysql://root@127.0.0.1:3306/test?parseTime=true",
		"mysql://root@127.0.0.1:3306/test?tls=maybe",
		"mysql://root@127.0.0.1:3306/test?timeout=soon",
	} {
		if l, err := Open(ctx, bad); !errors.Is(err, lease.ErrInvalid) {
			if l != nil {
				l.Close()
			}
			t.Errorf("Open(%s): %v, want ErrInvalid", bad, err)
		}
	}
}

// TestURLTranslation checks what the server URLs become for the drivers.
func TestURLTranslation(t *testing.T) {
	u, _ := url.Parse("postgresql://app:pw@db:5433/prod?sslmode=require&table=x&application_name=jobs")
	q, err := lease.URLQuery(u, "table", "sslmode", "application_name")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := postgresDSN(u, q), "postgres://app:pw@db:5433/prod?application_name=jobs&sslmode=require"; got != want {
		t.Errorf("postgresDSN = %q, want %q", got, want)
	}
	u, _ = url.Parse("mysql://app:p%40ss@db/prod?tls=skip-verify&timeout=3s")
	cfg, err := mysqlConfig(u, u.Query())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "app" || cfg.Passwd != "p@ss" || cfg.Addr != "db:3306" || cfg.DBName != "prod" ||
		!cfg.InterpolateParams || cfg.TLSConfig != "skip-verify" || cfg.Timeout != 3*time.Second {
		t.Errorf("mysqlConfig = %+v", cfg)
	}
}

// TestDialectDetection checks that New recognises the three drivers.
func TestDialectDetection(t *testing.T) {
	s := sqliteStore(t)
	if d := s.newLocker(t).Dialect(); d != SQLite {
		t.Errorf("SQLite pool detected as %v", d)
	}
	for _, st := range []func(testing.TB) *store{postgresStore, mysqlStore} {
		t.Run("", func(t *testing.T) {
			s := st(t)
			if d := s.newLocker(t).Dialect(); d != s.dialect {
				t.Errorf("%s pool detected as %v", s.name, d)
			}
		})
	}
	if !mariaDBReturning("10.11.19-MariaDB-0+deb12u1") || mariaDBReturning("10.4.3-MariaDB") || mariaDBReturning("8.0.36") || !mariaDBReturning("11.4.2-MariaDB") {
		t.Error("mariaDBReturning misreads versions")
	}
}
