// Command fencing shows a lease holder that was paused past its lease
// wake up and write, and the systems it writes to refuse it, while the
// new holder's writes land.
//
// A holder can stop at any moment (a stop-the-world garbage collection, a
// frozen VM, a swapped-out process) for longer than its lease. Nothing
// runs in a frozen process, renewals included, so the lease expires and
// another worker takes it. When the first wakes up it carries on with the
// write it was about to make: a check of Lease.Valid() just before
// writing cannot help, because the pause can come between the check and
// the write. Only the system being written to can refuse the stale write,
// and the fencing token is how it tells: every new tenure's is larger.
//
// Here worker-a renews its lease and checks it, then its goroutine stops on
// a channel before its write, and nothing renews the lease, as in a frozen
// process.
// worker-b waits for the lease with lease.Run and gets it once worker-a's
// has expired in the store. Two resources are written:
//
//   - a SQL table, through package sqlfence: the fence check runs in the
//     write's own transaction, so the two commit or roll back together;
//   - an HTTP service, through fence.Transport on the client (the token
//     from lease.FromContext) and fence.Middleware on the server, whose
//     handler guards its own write with the same fence.
//
// The leases, the fences and the data live in one SQLite file, or in the
// PostgreSQL database at $FENCING_POSTGRES (a postgres:// URL) when it is
// set, in tables of their own that are dropped at the end.
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"

	"github.com/leasekit/lease"
	_ "github.com/leasekit/lease/backend/all" // the stores --backend may name
	sqllease "github.com/leasekit/lease/backend/sql"
	"github.com/leasekit/lease/fence"
	"github.com/leasekit/lease/fence/sqlfence"
)

func main() {
	backend := flag.String("backend", os.Getenv("LEASE_BACKEND"), "the lease store's URL (any lease.Open URL, e.g. mem:// or redis://127.0.0.1:6379); default: the SQL database of the fences")
	flag.Parse()
	if err := run(context.Background(), os.Getenv("FENCING_POSTGRES"), *backend, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// ttl is the lease's length: short, so that the pause outlasts it soon,
// yet long enough for a renewal and a check on a loaded machine.
const ttl = time.Second

// world is the shared state of one run: the database, and the lease store,
// the fence and the tables in it.
type world struct {
	db      *sql.DB
	locker  lease.Locker
	fence   *sqlfence.Fence
	reports string // the SQL resource
	pages   string // the HTTP service's data
	out     io.Writer
}

// run tells the story twice, for SQL and for HTTP, on a SQLite file, or
// on PostgreSQL when postgresURL is not empty. The leases live there too,
// or in the store at leaseURL when it is not empty: the fences only
// compare tokens, wherever they come from.
func run(ctx context.Context, postgresURL, leaseURL string, out io.Writer) (err error) {
	w, cleanup, err := open(ctx, postgresURL, leaseURL, out)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cleanup()) }()

	// The SQL resource: each write is a transaction that starts with the
	// fence check of the writer's lease.
	sqlWrite := func(ctx context.Context, l lease.Lease, body string) error {
		return w.fence.Tx(ctx, l.Name, l.Token, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO `+w.reports+` (id, body) VALUES (1, $1)
				ON CONFLICT (id) DO UPDATE SET body = excluded.body`, body)
			return err
		})
	}
	if err := story(ctx, w, "sql", "report", sqlWrite, w.reports); err != nil {
		return err
	}

	// The HTTP resource: a service that checks the headers, then guards
	// its own write with the same fence.
	srv, base, err := serve(w)
	if err != nil {
		return err
	}
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: &fence.Transport{Base: tr}}
	httpWrite := func(ctx context.Context, l lease.Lease, body string) error {
		req, err := http.NewRequestWithContext(ctx, "PUT", base+"/pages/1", strings.NewReader(body))
		if err != nil {
			return err
		}
		if _, underRun := lease.FromContext(ctx); !underRun {
			// A holder outside lease.Run tags its requests itself; under
			// Run, the Transport does it.
			if err := fence.SetHeader(req.Header, l.Name, l.Token); err != nil {
				return err
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if err := fence.CheckResponse(resp); err != nil {
			return err // 409 Conflict: a *fence.StaleError
		}
		if resp.StatusCode != http.StatusNoContent {
			msg, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("PUT: %s: %s", resp.Status, msg)
		}
		return nil
	}
	return story(ctx, w, "http", "publish", httpWrite, w.pages)
}

// story plays it out on one resource: worker-a writes, pauses past its
// lease, worker-b takes over and writes, worker-a wakes up and writes and
// is refused, worker-b writes again.
func story(ctx context.Context, w *world, label, name string, write func(context.Context, lease.Lease, string) error, table string) error {
	say := func(format string, args ...any) { fmt.Fprintf(w.out, label+": "+format+"\n", args...) }

	a, err := w.locker.Acquire(ctx, name, "worker-a", ttl)
	if err != nil {
		return err
	}
	say("worker-a holds the lease %q", name)
	if err := write(ctx, a, "draft by worker-a"); err != nil {
		return fmt.Errorf("worker-a's first write: %w", err)
	}
	say("worker-a writes: ok")

	// worker-a renews its lease and checks it, then stops before its next
	// write, on a channel that only worker-b's side of the story closes.
	// Nothing renews the lease while it is stopped.
	if a, err = w.locker.Renew(ctx, a, ttl); err != nil {
		return fmt.Errorf("worker-a's renewal: %w", err)
	}
	resume := make(chan struct{})
	var resumeOnce sync.Once
	wake := func() { resumeOnce.Do(func() { close(resume) }) }
	defer wake()
	checked := make(chan bool)
	late := make(chan error, 1)
	go func() {
		checked <- a.Valid()
		<-resume // paused: a GC pause, a frozen VM...
		late <- write(context.Background(), a, "late draft by worker-a")
	}()
	if !<-checked {
		return fmt.Errorf("worker-a's lease ran out right after its renewal: the machine is too slow for a %s lease", ttl)
	}
	say("worker-a renews its lease, checks that it is valid, then pauses before its next write")

	// worker-b waits for the lease: it gets it when worker-a's has expired
	// in the store.
	err = lease.Run(ctx, w.locker, name, ttl*10, func(ctx context.Context) error {
		b, _ := lease.FromContext(ctx)
		if b.Token <= a.Token {
			return fmt.Errorf("worker-b's token %d is not larger than worker-a's %d", b.Token, a.Token)
		}
		say("worker-b takes the lease once worker-a's has expired, with a larger token")
		if err := write(ctx, b, "final by worker-b"); err != nil {
			return fmt.Errorf("worker-b's write: %w", err)
		}
		say("worker-b writes: ok")

		wake()
		err := <-late
		var stale *fence.StaleError
		if !errors.As(err, &stale) {
			return fmt.Errorf("worker-a's late write got %v, not refused as stale: it would overwrite worker-b's", err)
		}
		say("worker-a wakes up and writes: refused (fence.ErrStale), worker-b's token beat its own")

		if err := write(ctx, b, "final by worker-b, revised"); err != nil {
			return fmt.Errorf("worker-b's second write: %w", err)
		}
		say("worker-b writes again: ok")
		return nil
	}, lease.WithOwner("worker-b"), lease.WithWait(20*ttl))
	if err != nil {
		return err
	}

	var body string
	if err := w.db.QueryRowContext(ctx, `SELECT body FROM `+table+` WHERE id = 1`).Scan(&body); err != nil {
		return err
	}
	say("the data reads %q", body)
	if body != "final by worker-b, revised" {
		return fmt.Errorf("%s: the data reads %q, not worker-b's last write", label, body)
	}
	return nil
}

// serve starts the HTTP service on a loopback port: PUT /pages/1 writes
// the page, guarded by the fence of the lease the request names.
func serve(w *world) (*http.Server, string, error) {
	put := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		// Middleware accepted the token; guard the write itself too, in
		// its transaction, so that no newer holder's write can come
		// between the check and this one.
		name, token, _ := fence.FromContext(r.Context())
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		err = w.fence.Tx(r.Context(), name, token, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(r.Context(), `INSERT INTO `+w.pages+` (id, body) VALUES (1, $1)
				ON CONFLICT (id) DO UPDATE SET body = excluded.body`, string(body))
			return err
		})
		var stale *fence.StaleError
		switch {
		case errors.As(err, &stale):
			fence.WriteStale(rw, stale)
		case err != nil:
			http.Error(rw, "the write failed", http.StatusInternalServerError)
		default:
			rw.WriteHeader(http.StatusNoContent)
		}
	})
	mux := http.NewServeMux()
	mux.Handle("PUT /pages/1", fence.Middleware(w.fence, put))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return srv, "http://" + l.Addr().String(), nil
}

// open opens the database and makes the lease store, the fence and the
// tables; cleanup drops what it made.
func open(ctx context.Context, postgresURL, leaseURL string, out io.Writer) (w *world, cleanup func() error, err error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := ""
	var db *sql.DB
	var dir string
	if postgresURL != "" {
		suffix = "_" + hex.EncodeToString(b[:]) // beside other runs' tables
		db, err = sql.Open("pgx", postgresURL)
	} else {
		if dir, err = os.MkdirTemp("", "lease-fencing-example"); err != nil {
			return nil, nil, err
		}
		db, err = sql.Open("sqlite", "file:"+filepath.Join(dir, "fencing.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	}
	if err != nil {
		return nil, nil, err
	}
	w = &world{db: db, reports: "fencing_reports" + suffix, pages: "fencing_pages" + suffix, out: out}
	tables := []string{w.reports, w.pages, "fencing_leases" + suffix, "fencing_fences" + suffix}
	cleanup = func() error {
		var errs []error
		if postgresURL != "" {
			for _, t := range tables {
				if _, err := db.Exec("DROP TABLE IF EXISTS " + t); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if w.locker != nil {
			errs = append(errs, w.locker.Close())
		}
		errs = append(errs, db.Close())
		if dir != "" {
			errs = append(errs, os.RemoveAll(dir))
		}
		return errors.Join(errs...)
	}
	fail := func(err error) (*world, func() error, error) { return nil, nil, errors.Join(err, cleanup()) }
	for _, t := range []string{w.reports, w.pages} {
		if _, err := db.ExecContext(ctx, `CREATE TABLE `+t+` (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`); err != nil {
			return fail(err)
		}
	}
	if leaseURL != "" {
		w.locker, err = lease.Open(ctx, leaseURL)
	} else {
		w.locker, err = sqllease.New(db, sqllease.WithTable("fencing_leases"+suffix))
	}
	if err != nil {
		return fail(err)
	}
	if w.fence, err = sqlfence.New(ctx, db, sqlfence.WithTable("fencing_fences"+suffix)); err != nil {
		return fail(err)
	}
	return w, cleanup, nil
}
