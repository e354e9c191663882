package sqlitelease_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/leasekit/lease"
	sqlitelease "github.com/leasekit/lease/backend/sql/sqlite"
)

// A SQLite file opened from a URL: the Locker owns the pool.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "lease-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	locker, err := sqlitelease.Open(ctx, "sqlite://"+filepath.Join(dir, "lease.db"))
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

// Importing the package registers the sqlite scheme with lease.Open.
func Example_leaseOpen() {
	dir, _ := os.MkdirTemp("", "lease-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	locker, err := lease.Open(ctx, "sqlite://"+filepath.Join(dir, "lease.db")+"?table=job_leases")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	err = lease.Run(ctx, locker, "import", time.Minute, func(ctx context.Context) error {
		l, _ := lease.FromContext(ctx)
		fmt.Println("running with a token:", l.Token > 0)
		return nil
	})
	fmt.Println(err)
	// Output:
	// running with a token: true
	// <nil>
}
