package main

import (
	"context"
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

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lines are the lines the program prints; which export gets which slot,
// and in which order, vary from run to run.
var lines = []*regexp.Regexp{
	regexp.MustCompile(`^export-[1-6] runs in slot [01]$`),
	regexp.MustCompile(`^6 exports ran, at most [12] at once$`),
	regexp.MustCompile(`^a late write by slot [01]'s first holder: refused: true$`),
	regexp.MustCompile(`^slots held now: 0$`),
}

// checkOutput fails t unless out is the program's output: six exports in
// slots 0 and 1, then the summary, the refused late write and no holder
// left.
func checkOutput(t *testing.T, out string) {
	t.Helper()
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(got) != exports+3 {
		t.Fatalf("%d lines, want %d:\n%s", len(got), exports+3, out)
	}
	for i, line := range got {
		re := lines[0]
		if i >= exports {
			re = lines[i-exports+1]
		}
		if !re.MatchString(line) {
			t.Errorf("line %d %q does not match %s:\n%s", i+1, line, re, out)
		}
	}
}

func TestRun(t *testing.T) {
	var out strings.Builder
	l, err := lease.Open(t.Context(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := run(t.Context(), &out, l, "exports", time.Second); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	checkOutput(t, out.String())
}

// TestREADME: the output README.md shows is one the program prints.
func TestREADME(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n$ go run ./examples/semaphore\n")
	if !ok {
		t.Fatal("README.md shows no output of go run ./examples/semaphore")
	}
	block, _, _ := strings.Cut(rest, "```")
	checkOutput(t, block)
}

// TestStores runs the program on SQLite and on each server whose
// LEASE_TEST_* variable is set (else the subtest skips, or fails under
// LEASE_TEST_REQUIRE_ALL=1).
func TestStores(t *testing.T) {
	for _, s := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string {
			return (&url.URL{Scheme: "sqlite", Path: filepath.ToSlash(filepath.Join(t.TempDir(), "lease.db"))}).String()
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
	} {
		t.Run(s.name, func(t *testing.T) {
			backend := s.url(t)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			l, err := lease.Open(ctx, backend)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var out strings.Builder
			name := fmt.Sprintf("examples-semaphore-%08x", rand.Uint32())
			if err := run(ctx, &out, l, name, 2*time.Second); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			checkOutput(t, out.String())
		})
	}
}
