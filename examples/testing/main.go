// Command testing is a small program written so that its tests can swap
// its real lease store for the memory backend and drive expiry with the
// memory backend's clock instead of sleeping. See main_test.go: that test
// file is the example.
//
// The one rule that makes this work: code that uses a lease takes a
// lease.Locker; only main opens the real store.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/leasekit/lease"
	_ "github.com/leasekit/lease/backend/all"
)

func main() {
	def := url.URL{Scheme: "sqlite", Path: filepath.ToSlash(filepath.Join(os.TempDir(), "lease-example.db"))}
	backend := flag.String("backend", def.String(), "lease store URL")
	flag.Parse()
	ctx := context.Background()
	l, err := lease.Open(ctx, *backend)
	if err != nil {
		log.Fatal(err)
	}
	err = run(ctx, l, os.Stdout)
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		log.Fatal(err)
	}
}

// Worker claims jobs that must not run on two machines at once.
type Worker struct {
	Locker lease.Locker
	ID     string        // this worker's owner identity
	TTL    time.Duration // how long a crashed worker blocks a job
}

// Claim takes the lease of job for w. When another worker has it, the
// error is a *lease.HeldError saying who and for how long.
func (w *Worker) Claim(ctx context.Context, job string) (lease.Lease, error) {
	return w.Locker.Acquire(ctx, "job/"+job, w.ID, w.TTL)
}

// run claims the "send-invoices" job, does it and releases it.
func run(ctx context.Context, l lease.Locker, out io.Writer) error {
	w := &Worker{Locker: l, ID: lease.NewOwner(), TTL: time.Minute}
	claim, err := w.Claim(ctx, "send-invoices")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sending invoices (token %d)\n", claim.Token)
	return l.Release(ctx, claim)
}
