package sqlitelease

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	sqllease "github.com/leasekit/lease/backend/sql"
)

// TestOpenURLs checks the URL forms Open and lease.Open accept and refuse.
func TestOpenURLs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	// Absolute path, through lease.Open, with table and autocreate.
	abs := "sqlite://" + filepath.Join(dir, "a.db") + "?table=jobs_leases&autocreate=true&busy_timeout=1000"
	l, err := lease.Open(ctx, abs)
	if err != nil {
		t.Fatalf("lease.Open(%s): %v", abs, err)
	}
	if got := l.(*sqllease.Locker).Table(); got != "jobs_leases" {
		t.Errorf("table = %q, want jobs_leases", got)
	}
	if _, err := l.Acquire(ctx, "x", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	l.Close()

	// Options given to Open win over the URL's.
	o, err := Open(ctx, abs, sqllease.WithTable("other"))
	if err != nil {
		t.Fatal(err)
	}
	if o.Table() != "other" || o.Dialect() != sqllease.SQLite {
		t.Errorf("Open with WithTable(other): table %q, dialect %v", o.Table(), o.Dialect())
	}
	o.Close()

	// Relative path, resolved against the working directory.
	t.Chdir(dir)
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
		"sqlite:///x.db?table=a&table=b",
		"sqlite:///x.db?table=temp.x",
		"sqlite:///x.db%zz",
	} {
		if l, err := Open(ctx, bad); !errors.Is(err, lease.ErrInvalid) || !strings.HasPrefix(err.Error(), "lease/sql: open: ") {
			if l != nil {
				l.Close()
			}
			t.Errorf("Open(%s): %v, want ErrInvalid prefixed lease/sql: open:", bad, err)
		}
	}
}
