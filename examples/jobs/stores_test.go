package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease/internal/testenv"
)

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

// uniquePrefix is a lease name prefix no other test or run uses, so that
// tests sharing a server never meet.
func uniquePrefix() string {
	return fmt.Sprintf("examples-jobs-%08x/", rand.Uint32())
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
