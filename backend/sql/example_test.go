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

	"github.com/leasekit/lease"
	sqllease "github.com/leasekit/lease/backend/sql"
)

// A SQLite file opened from a URL: the Locker owns the pool.
func Example_sqlite() {
	dir, _ := os.MkdirTemp("", "lease-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	locker, err := sqllease.Open(ctx, "sqlite://"+filepath.Join(dir, "lease.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	l, err := locker.Acquire(ctx, "nightly-report", "worker-1", time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = locker.Acquire(ctx, "nightly-report", "worker-2", time.Minute)
	var held *lease.HeldError
	fmt.Println(errors.As(err, &held), held.Owner)
	fmt.Println(locker.Release(ctx, l))
	// Output:
	// true worker-1
	// <nil>
}

// A Locker on a pool the program already has: Close leaves the pool open.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "lease-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

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
	got, _ := locker.Inspect(ctx, "import")
	fmt.Println(got.Owner, got.Token == l.Token)
	// Output: worker-1 true
}

// The DDL for a migration tool, with auto-create switched off.
func ExampleSchema() {
	ddl, _ := sqllease.Schema(sqllease.PostgreSQL, "leases")
	fmt.Println(strings.SplitN(ddl, "\n", 2)[0])
	// Output: CREATE TABLE IF NOT EXISTS leases (
}

// PostgreSQL, from a URL (this example only compiles: it needs a server).
func Example_postgres() {
	ctx := context.Background()
	locker, err := sqllease.Open(ctx, "postgres://app@db.internal:5432/app?sslmode=require&table=leases")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	l, err := locker.Acquire(ctx, "billing-run", lease.NewOwner(), 30*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Release(ctx, l)
}

// MySQL or MariaDB through lease.Open (this example only compiles: it
// needs a server).
func Example_mysql() {
	ctx := context.Background()
	locker, err := lease.Open(ctx, "mysql://app:secret@db.internal:3306/app?table=leases")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	if _, err := locker.Acquire(ctx, "billing-run", lease.NewOwner(), 30*time.Second); errors.Is(err, lease.ErrHeld) {
		fmt.Println("someone else is running it")
	}
}
