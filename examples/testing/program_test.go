package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/testenv"
)

// This file tests the program itself, on every store, and the README's
// account of it; main_test.go is the example of testing code that uses a
// lease.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestREADME runs the program as `go run ./examples/testing` does, with no
// flag and no $LEASE_BACKEND, and compares its output with README.md's.
func TestREADME(t *testing.T) {
	var out, errs strings.Builder
	if err := cli(t.Context(), nil, noEnv, &out, &errs); err != nil {
		t.Fatalf("cli: %v\n%s%s", err, out.String(), errs.String())
	}
	if want := readmeOutput(t, "go run ./examples/testing"); out.String() != want {
		t.Errorf("the program prints:\n%s\nREADME.md shows:\n%s", out.String(), want)
	}
}

// TestStores runs the program on every store, with a job of its own: it
// says which store it used, claims the job and leaves no lease behind.
func TestStores(t *testing.T) {
	forEachStore(t, func(t *testing.T, ctx context.Context, backend string) {
		job := uniqueJob()
		var out, errs strings.Builder
		if err := cli(ctx, []string{"--backend", backend, "--job", job}, noEnv, &out, &errs); err != nil {
			t.Fatalf("cli: %v\n%s%s", err, out.String(), errs.String())
		}
		want := regexp.MustCompile(`^store: ` + regexp.QuoteMeta(describe(backend)) + `\n` +
			`job/` + job + `: claimed with token [1-9][0-9]*\n` +
			`job/` + job + `: done, released\n$`)
		if !want.MatchString(out.String()) {
			t.Errorf("output:\n%s\nwant it to match\n%s", out.String(), want)
		}
		if strings.HasPrefix(backend, "mem:") {
			return // a new mem:// is a new store; TestRun checks memory
		}
		l, err := lease.Open(ctx, backend)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, err := l.Inspect(ctx, "job/"+job); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("the program left its lease behind: %v", err)
		}
	})
}

// stores are the stores the example's tests run on: memory and a SQLite
// file always, each server when its LEASE_TEST_* variable is set (else
// the subtest skips, or fails under LEASE_TEST_REQUIRE_ALL=1).
var stores = []struct {
	name string
	url  func(t *testing.T) string
}{
	{"memory", func(*testing.T) string { return "mem://" }},
	{"sqlite", func(t *testing.T) string {
		u := url.URL{Scheme: "sqlite", Path: filepath.ToSlash(filepath.Join(t.TempDir(), "lease.db"))}
		return u.String()
	}},
	{"postgres", func(t *testing.T) string { return testenv.Lookup(t, "LEASE_TEST_POSTGRES") }},
	{"mysql", func(t *testing.T) string { return testenv.Lookup(t, "LEASE_TEST_MYSQL") }},
	{"redis", func(t *testing.T) string { return testenv.Lookup(t, "LEASE_TEST_REDIS") }},
	{"etcd", func(t *testing.T) string {
		v := testenv.Lookup(t, "LEASE_TEST_ETCD")
		if !strings.Contains(v, "://") {
			v = "etcd://" + v // the variable may hold bare endpoints
		}
		return v
	}},
}

// storeTimeout bounds each test on one store.
const storeTimeout = 30 * time.Second

// forEachStore runs test on every store, as a subtest with a context
// bounded by storeTimeout.
func forEachStore(t *testing.T, test func(t *testing.T, ctx context.Context, backend string)) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			backend := s.url(t)
			ctx, cancel := context.WithTimeout(t.Context(), storeTimeout)
			defer cancel()
			test(t, ctx, backend)
		})
	}
}

// uniqueJob is a job name no other test or run uses, so that tests
// sharing a server never meet.
func uniqueJob() string {
	return fmt.Sprintf("send-invoices-%08x", rand.Uint32())
}

// readmeOutput returns the output that README.md shows for command: the
// lines after "$ command" up to the end of its block.
func readmeOutput(t *testing.T, command string) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n$ "+command+"\n")
	if !ok {
		t.Fatalf("README.md shows no output of %q", command)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("README.md: the block with %q does not end", command)
	}
	return block
}

// noEnv is an empty environment.
func noEnv(string) string { return "" }
