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
	"github.com/leasekit/lease/backend/sql/internal/sqltest"
)

// TestNoPasswordInErrors checks that no error of Open or lease.Open quotes
// the URL's password, whether the URL does not parse, pgx refuses it or
// the server cannot be reached (issue 9, defect 3).
func TestNoPasswordInErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, raw := range []string{
		"postgres://app:Hunter2%zz@host/db",
		"postgres://app:Hunter2@host:port/db",
		"postgresql://app:Hunter2#x@host/db",
		"postgres://app:Hunter2/x@host/db",
		"postgres://app:Hunter2@host:99999/db",
		"postgres://app:Hunter2@host/db?sslmode=sometimes",
		"postgres://app:Hunter2@host/db?connect_timeout=soon",
		"postgres://app:Hunter2@host/db?sslrootcert=/nonexistent/ca.pem&sslmode=verify-full",
		"postgres://app:Hunter2@127.0.0.1:1/db?sslmode=disable",
		"postgres://app:Hunter2@" + sqltest.HangUp(t) + "/db?sslmode=disable",
	} {
		l, err := Open(ctx, raw)
		if l != nil {
			l.Close()
		}
		if err == nil || strings.Contains(err.Error(), "Hunter2") {
			t.Errorf("Open(%s): %v, want an error without the password", raw, err)
		}
		t.Logf("%s\n\t%v", raw, err)
		if _, perr := url.Parse(raw); perr != nil {
			continue // lease.Open refuses it itself, before this package sees it
		}
		if _, err := lease.Open(ctx, raw); err == nil || strings.Contains(err.Error(), "Hunter2") {
			t.Errorf("lease.Open(%s): %v, want an error without the password", raw, err)
		}
	}
}

// TestOpenOnSilentServer checks that Open and lease.Open give up when
// their context ends on a server that accepts connections and never
// answers (issue 9, defect 8), as on one that hangs up.
func TestOpenOnSilentServer(t *testing.T) {
	for _, raw := range []string{
		"postgres://app@" + sqltest.Silent(t) + "/db?sslmode=disable",
		"postgres://app@" + sqltest.Silent(t) + "/db", // sslmode=prefer: TLS first, then plain
	} {
		for name, open := range map[string]func(ctx context.Context, raw string) error{
			"Open":       func(ctx context.Context, raw string) error { _, err := Open(ctx, raw); return err },
			"lease.Open": func(ctx context.Context, raw string) error { _, err := lease.Open(ctx, raw); return err },
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			start := time.Now()
			err := open(ctx, raw)
			elapsed := time.Since(start)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s(%s): %v, want an error matching context.DeadlineExceeded", name, raw, err)
			}
			if elapsed > 700*time.Millisecond {
				t.Errorf("%s(%s) returned after %s with a 300ms context", name, raw, elapsed)
			}
			t.Logf("%s returned after %dms: %v", name, elapsed.Milliseconds(), err)
		}
	}
}

// TestOperationsOnSilentServer checks that every operation of a Locker
// whose server never answers returns by its context's deadline.
func TestOperationsOnSilentServer(t *testing.T) {
	u, _ := url.Parse("postgres://app@" + sqltest.Silent(t) + "/db?sslmode=disable")
	c, err := connector(u, u.Query())
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()
	l, err := sqllease.New(db)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ls := lease.Lease{Name: "x", Owner: "a", Token: 1}
	for op, fn := range map[string]func(ctx context.Context) error{
		"Acquire": func(ctx context.Context) error { _, err := l.Acquire(ctx, "x", "a", time.Minute); return err },
		"Renew":   func(ctx context.Context) error { _, err := l.Renew(ctx, ls, time.Minute); return err },
		"Release": func(ctx context.Context) error { return l.Release(ctx, ls) },
		"Inspect": func(ctx context.Context) error { _, err := l.Inspect(ctx, "x"); return err },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		err := fn(ctx)
		elapsed := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("%s: %v, want a context.DeadlineExceeded and no lease outcome", op, err)
		}
		if elapsed > 700*time.Millisecond {
			t.Errorf("%s returned after %s with a 300ms context", op, elapsed)
		}
	}
}
