package lease_test

// The README's Go examples. Each ```go block of README.md is, line for
// line, a run of lines in the body of one Example function below
// (TestReadmeGoBlocksAreExamples checks it), so the README's code compiles
// and runs under go test. The lines around it stand in for what a program
// has already: its context, its *sql.DB, its store's URL, its work.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/leasekit/lease"
	sqllease "github.com/leasekit/lease/backend/sql"
	_ "github.com/leasekit/lease/backend/sql/sqlite" // lease.Open's sqlite: scheme, and database/sql's "sqlite" driver
)

// Run on a *sql.DB the program already has: the README's first example.
func ExampleRun_database() {
	db, done := readmeDB()
	defer done()
	ctx := context.Background()

	locker, err := sqllease.New(db) // db: your *sql.DB on PostgreSQL, MySQL/MariaDB or SQLite
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	err = lease.Run(ctx, locker, "nightly-report", time.Minute, func(ctx context.Context) error {
		l, _ := lease.FromContext(ctx)
		return generateReport(ctx, l.Token) // ctx ends if the lease is lost
	})
	var held *lease.HeldError
	if errors.As(err, &held) {
		log.Printf("skipped: %s holds it for another %s", held.Owner, held.Remaining)
	}
	// Output: report generated under a fencing token
}

// Open by URL, and the Locker's own calls: the README's second example.
func ExampleOpen_url() {
	storeURL, done := readmeURL()
	defer done()
	ctx := context.Background()

	locker, err := lease.Open(ctx, storeURL) // "postgres://app@db:5432/app", "redis://cache:6379/0", "etcd://etcd:2379", ...
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	l, err := locker.Acquire(ctx, "migrations", lease.NewOwner(), time.Minute)
	if err != nil {
		log.Fatal(err) // errors.Is(err, lease.ErrHeld) when another owner has it
	}
	work, cancel := context.WithDeadline(ctx, l.Deadline) // stop before the store can give it away
	defer cancel()
	if err := migrate(work, l.Token); err != nil {
		log.Print(err)
	}
	if err := locker.Release(ctx, l); errors.Is(err, lease.ErrLost) {
		log.Print("the lease ended before the work did")
	}
	// Output: migrated under a fencing token
}

// readmeDB opens a SQLite file in a directory of its own, as a program's
// own *sql.DB would be, and returns it with a function that removes both.
func readmeDB() (*sql.DB, func()) {
	dir, err := os.MkdirTemp("", "lease-readme-")
	if err != nil {
		log.Fatal(err)
	}
	dsn := "file:" + filepath.Join(dir, "lease.db") + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		log.Fatal(err)
	}
	return db, func() { db.Close(); os.RemoveAll(dir) }
}

// readmeURL returns the sqlite: URL of a file in a directory of its own,
// with a function that removes the directory.
func readmeURL() (string, func()) {
	dir, err := os.MkdirTemp("", "lease-readme-")
	if err != nil {
		log.Fatal(err)
	}
	return "sqlite://" + filepath.Join(dir, "lease.db"), func() { os.RemoveAll(dir) }
}

// generateReport stands in for the work a lease guards.
func generateReport(ctx context.Context, token uint64) error {
	if token == 0 {
		return errors.New("no fencing token")
	}
	fmt.Println("report generated under a fencing token")
	return ctx.Err()
}

// migrate stands in for the work a lease guards.
func migrate(ctx context.Context, token uint64) error {
	if token == 0 {
		return errors.New("no fencing token")
	}
	fmt.Println("migrated under a fencing token")
	return ctx.Err()
}
