// Command testing is a small program written so that its tests can swap
// its real lease store for the memory backend and drive expiry with the
// memory backend's clock instead of sleeping. See main_test.go: that test
// file is the example.
//
// The one rule that makes this work: code that uses a lease takes a
// lease.Locker; only main (cli, here) opens the real store, from
// --backend URL, else $LEASE_BACKEND, else mem://, and says which it used.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/leasekit/lease"
	_ "github.com/leasekit/lease/backend/all"
)

func main() {
	err := cli(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "testing:", err)
		os.Exit(1)
	}
}

// cli is the program: it reads the flags, opens the store (the only place
// that does), says which it is, and runs the job on it.
func cli(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("testing", flag.ContinueOnError)
	fs.SetOutput(stderr)
	backend := fs.String("backend", "", "lease store URL (default $LEASE_BACKEND, else mem://)")
	job := fs.String("job", "send-invoices", "the job to claim: its lease is job/NAME")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	raw := *backend
	if raw == "" {
		raw = getenv("LEASE_BACKEND")
	}
	if raw == "" {
		raw = "mem://"
	}
	l, err := lease.Open(ctx, raw)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "store: %s\n", describe(raw))
	err = run(ctx, l, *job, stdout)
	return errors.Join(err, l.Close())
}

// describe names a store URL for people: without its password or query,
// which can hold secrets.
func describe(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL that does not parse)"
	}
	if u.Host == "" && u.Path == "" && u.Opaque == "" {
		return u.Scheme + "://"
	}
	u.RawQuery, u.Fragment = "", ""
	return u.Redacted()
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

// run claims job, does it and releases it.
func run(ctx context.Context, l lease.Locker, job string, out io.Writer) error {
	w := &Worker{Locker: l, ID: lease.NewOwner(), TTL: time.Minute}
	claim, err := w.Claim(ctx, job)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: claimed with token %d\n", claim.Name, claim.Token)
	// ... the job's work, which passes claim.Token to what it writes to ...
	if err := l.Release(ctx, claim); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: done, released\n", claim.Name)
	return nil
}
