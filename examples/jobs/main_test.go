package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/leasekit/lease/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lines are the lines the program prints; which worker runs which job,
// and how often a job is deferred, vary from run to run.
var lines = []*regexp.Regexp{
	regexp.MustCompile(`^store: [a-z]+:.*$`),
	regexp.MustCompile(`^worker-[12]: job [1-7] \([a-z-]+\) (completed|deferred [0-9.]+m?s: \S+ is busy|failed \(attempt [12]\), will retry: endpoint answered 503)$`),
	regexp.MustCompile(`^worker-[12]: job 7 \(export\) completed, but its lease was lost mid-run: .*lease: lost$`),
	regexp.MustCompile(`^\{Completed:7 Deferred:[0-9]+ Retried:1 Failed:0 Lost:1\}$`),
}

// checkOutput fails t unless out is the program's output on store: every
// line one it prints, the store named first, the counts last, and the
// lost lease logged.
func checkOutput(t *testing.T, out, store string) {
	t.Helper()
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if got[0] != "store: "+store {
		t.Errorf("first line %q, want %q", got[0], "store: "+store)
	}
	if !lines[3].MatchString(got[len(got)-1]) {
		t.Errorf("last line %q, want the counts, as %s", got[len(got)-1], lines[3])
	}
	lost := 0
	for _, line := range got {
		known := false
		for _, re := range lines {
			known = known || re.MatchString(line)
		}
		if !known {
			t.Errorf("unexpected line %q", line)
		}
		if lines[2].MatchString(line) {
			lost++
		}
	}
	if lost != 1 {
		t.Errorf("the lost lease was logged %d times, want once", lost)
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

// TestREADME runs the program as `go run ./examples/jobs` does, with no
// flag and no $LEASE_BACKEND, and checks its output, and the README's, line
// by line.
func TestREADME(t *testing.T) {
	var out, errs strings.Builder
	if err := cli(t.Context(), nil, noEnv, &out, &errs); err != nil {
		t.Fatalf("cli: %v\n%s%s", err, out.String(), errs.String())
	}
	checkOutput(t, out.String(), "mem://")
	t.Run("README.md", func(t *testing.T) {
		checkOutput(t, readmeOutput(t, "go run ./examples/jobs"), "mem://")
	})
}

// TestStores runs the program on every store, with a lease name prefix of
// its own: run itself fails if two jobs ever ran under one lease at once.
func TestStores(t *testing.T) {
	testenv.Slow(t)
	forEachStore(t, func(t *testing.T, ctx context.Context, backend string) {
		var out, errs strings.Builder
		if err := cli(ctx, []string{"--backend", backend, "--prefix", uniquePrefix()}, noEnv, &out, &errs); err != nil {
			t.Fatalf("cli: %v\n%s%s", err, out.String(), errs.String())
		}
		checkOutput(t, out.String(), describe(backend))
	})
}
