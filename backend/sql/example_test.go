package sqllease_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite" // the program's own choice of driver: sqllease imports none

	"github.com/leasekit/lease"
	sqllease "github.com/leasekit/lease/backend/sql"
)

// A Locker on a pool the program already has: Close leaves the pool open.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "lease-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	// modernc.org/sqlite registers the driver name "sqlite".
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()

	locker, err := sqllease.New(db, sqllease.WithTable("job_leases"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	l, err := locker.Acquire(ctx, "import", "worker-1", time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = locker.Acquire(ctx, "import", "worker-2", time.Minute)
	var held *lease.HeldError
	fmt.Println(errors.As(err, &held), held.Owner)

	got, _ := locker.Inspect(ctx, "import")
	fmt.Println(got.Owner, got.Token == l.Token, locker.Dialect())
	// Output:
	// true worker-1
	// worker-1 true sqlite
}

// A Locker that owns its pool, opened on a driver's connector; Open in
// backend/sql/postgres, mysql and sqlite does this from a URL.
func ExampleOpenConnector() {
	dir, _ := os.MkdirTemp("", "lease-example")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c, err := sqlite.NewConnector("file:" + filepath.Join(dir, "lease.db") + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		fmt.Println(err)
		return
	}
	locker, err := sqllease.OpenConnector(ctx, c) // checks the table within ctx
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close() // closes the pool

	l, err := locker.Acquire(ctx, "nightly-report", "worker-1", time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(locker.Release(ctx, l))
	fmt.Println(errors.Is(locker.Release(ctx, l), lease.ErrLost))
	// Output:
	// <nil>
	// true
}

// The DDL for a migration tool, with auto-create switched off.
func ExampleSchema() {
	ddl, _ := sqllease.Schema(sqllease.PostgreSQL, "leases")
	fmt.Println(strings.SplitN(ddl, "\n", 2)[0])

	_, err := sqllease.Schema(sqllease.PostgreSQL, "pg_temp.leases")
	fmt.Println(errors.Is(err, lease.ErrInvalid))
	// Output:
	// CREATE TABLE IF NOT EXISTS leases (
	// true
}
