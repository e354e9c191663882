package mysqllease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leasekit/lease"
	sqllease "github.com/leasekit/lease/backend/sql"
	"github.com/leasekit/lease/backend/sql/internal/sqltest"
	"github.com/leasekit/lease/internal/testenv"
)

// TestNoPasswordInErrors checks that no error of Open or lease.Open quotes
// the URL's password (issue 9, defect 3).
func TestNoPasswordInErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, raw := range []string{
		"mysql://app:Hunter2%zz@host/db",
		"mysql://app:Hunter2@host:port/db",
		"mysql://app:Hunter2#x@host/db",
		"mysql://app:Hunter2@host:99999/db",
		"mysql://app:Hunter2@127.0.0.1:1/db",
		"mysql://app:Hunter2@" + sqltest.HangUp(t) + "/db",
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
// answers (issue 9, defect 8), and that every operation of a Locker on
// such a server does too.
func TestOpenOnSilentServer(t *testing.T) {
	testenv.Slow(t)
	raw := "mysql://app@" + sqltest.Silent(t) + "/db"
	check := func(op string, fn func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := fn(ctx)
		elapsed := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("%s: %v, want an error matching context.DeadlineExceeded and no lease outcome", op, err)
		}
		if elapsed > 700*time.Millisecond {
			t.Errorf("%s returned after %s with a 300ms context", op, elapsed)
		}
		t.Logf("%s returned after %dms: %v", op, elapsed.Milliseconds(), err)
	}
	check("Open", func(ctx context.Context) error { _, err := Open(ctx, raw); return err })
	check("lease.Open", func(ctx context.Context) error { _, err := lease.Open(ctx, raw); return err })

	u, _ := url.Parse(raw)
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
	check("Acquire", func(ctx context.Context) error { _, err := l.Acquire(ctx, "x", "a", time.Minute); return err })
	check("Renew", func(ctx context.Context) error { _, err := l.Renew(ctx, ls, time.Minute); return err })
	check("Release", func(ctx context.Context) error { return l.Release(ctx, ls) })
	check("Inspect", func(ctx context.Context) error { _, err := l.Inspect(ctx, "x"); return err })
}

// recorder is a go-sql-driver Logger that keeps what it is given.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorder) Print(v ...any) {
	r.mu.Lock()
	r.lines = append(r.lines, fmt.Sprint(v...))
	r.mu.Unlock()
}

// TestDriverPrintsNothing opens URLs of servers that hang up and that
// never answer, with go-sql-driver's package-wide logger (stderr by
// default) replaced by a recorder: nothing of the library's may reach it
// (issue 9, defect 8: a stray "[mysql] packets.go" line).
func TestDriverPrintsNothing(t *testing.T) {
	var r recorder
	if err := mysql.SetLogger(&r); err != nil {
		t.Fatal(err)
	}
	defer mysql.SetLogger(log.New(os.Stderr, "[mysql] ", log.Ldate|log.Ltime))
	for _, raw := range []string{
		"mysql://app@" + sqltest.HangUp(t) + "/db",
		"mysql://app@" + sqltest.Silent(t) + "/db",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		if _, err := Open(ctx, raw); err == nil {
			t.Errorf("Open(%s) succeeded", raw)
		}
		cancel()
	}
	if len(r.lines) > 0 {
		t.Errorf("go-sql-driver printed, through its package-wide logger:\n%s", strings.Join(r.lines, "\n"))
	}
}
