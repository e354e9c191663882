package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/leasekit/lease/fence"
	"github.com/leasekit/lease/fence/sqlfence"
)

// Two holders of the lease "report" write to the same database; the
// older one's token is refused once the newer one has written. Tokens
// come from Lease.Token in a real program.
func Example() {
	dir, err := os.MkdirTemp("", "sqlfence-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE reports (id INTEGER PRIMARY KEY, body TEXT)`); err != nil {
		panic(err)
	}

	f, err := sqlfence.New(ctx, db) // creates the table lease_fences
	if err != nil {
		panic(err)
	}
	// write is a guarded write: the fence check and the UPDATE commit
	// together, or not at all.
	write := func(token uint64, body string) error {
		return f.Tx(ctx, "report", token, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO reports (id, body) VALUES (1, ?1)
				ON CONFLICT (id) DO UPDATE SET body = excluded.body`, body)
			return err
		})
	}

	fmt.Println("old holder writes:", write(100, "draft"))
	fmt.Println("new holder writes:", write(200, "final"))
	err = write(100, "late draft")
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		fmt.Printf("old holder wakes up and writes: refused, token %d beat %d\n", stale.Max, stale.Token)
	}

	var body string
	if err := db.QueryRowContext(ctx, `SELECT body FROM reports WHERE id = 1`).Scan(&body); err != nil {
		panic(err)
	}
	fmt.Println("the report reads:", body)
	// Output:
	// old holder writes: <nil>
	// new holder writes: <nil>
	// old holder wakes up and writes: refused, token 200 beat 100
	// the report reads: final
}

// Guard inside a transaction of your own, here with the write first: the
// order inside the transaction does not matter, the commit does.
func ExampleFence_Guard() {
	dir, err := os.MkdirTemp("", "sqlfence-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE events (holder TEXT)`); err != nil {
		panic(err)
	}
	f, err := sqlfence.New(ctx, db, sqlfence.WithTable("app_fences"))
	if err != nil {
		panic(err)
	}

	record := func(holder string, token uint64) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // after Commit, a no-op
		if _, err := tx.ExecContext(ctx, `INSERT INTO events (holder) VALUES (?1)`, holder); err != nil {
			return err
		}
		if err := f.Guard(ctx, tx, "ingest", token); err != nil {
			return err // the deferred Rollback undoes the INSERT
		}
		return tx.Commit()
	}
	fmt.Println(record("a", 7))
	fmt.Println(record("b", 9))
	fmt.Println(errors.Is(record("a", 7), fence.ErrStale))

	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil {
		panic(err)
	}
	fmt.Println("events recorded:", n)
	// Output:
	// <nil>
	// <nil>
	// true
	// events recorded: 2
}

// The DDL of the fence table, for your migrations.
func ExampleSchema() {
	ddl, err := sqlfence.Schema(sqlfence.PostgreSQL, "lease_fences")
	if err != nil {
		panic(err)
	}
	fmt.Println(ddl)
	// Output:
	// CREATE TABLE IF NOT EXISTS lease_fences (
	// 	fence_key BYTEA  NOT NULL PRIMARY KEY CHECK (octet_length(fence_key) = 32),
	// 	name      BYTEA  NOT NULL,
	// 	token     BIGINT NOT NULL
	// )
}
