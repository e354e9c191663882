package testenv_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/leasekit/lease/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a testing.TB that records a skip or a failure instead of
// ending the test; like the real ones, Skip and Fatalf end the goroutine,
// so run calls through run.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f on its own goroutine and waits for it to return or exit.
func run(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

// TestRequireBinary: a missing program skips with the Debian package's
// name, or fails under LEASE_TEST_REQUIRE_ALL=1; a present one is found.
func TestRequireBinary(t *testing.T) {
	t.Setenv(testenv.RequireAll, "")
	r := &recorder{TB: t}
	var path string
	run(func() { path = testenv.RequireBinary(r, "lease-no-such-program", "lease-pkg") })
	if path != "" || r.failed != "" ||
		!strings.Contains(r.skipped, "lease-no-such-program") || !strings.Contains(r.skipped, "apt-get install -y lease-pkg") {
		t.Errorf("missing program: path %q, skipped %q, failed %q", path, r.skipped, r.failed)
	}

	t.Setenv(testenv.RequireAll, "1")
	r = &recorder{TB: t}
	run(func() { testenv.RequireBinary(r, "lease-no-such-program", "lease-pkg") })
	if r.skipped != "" || !strings.Contains(r.failed, "lease-pkg") || !strings.Contains(r.failed, testenv.RequireAll) {
		t.Errorf("missing program in CI: skipped %q, failed %q", r.skipped, r.failed)
	}

	r = &recorder{TB: t}
	run(func() { path = testenv.RequireBinary(r, "sh", "dash") })
	if path == "" || r.skipped != "" || r.failed != "" {
		t.Errorf("sh: path %q, skipped %q, failed %q", path, r.skipped, r.failed)
	}
}

// TestLookup: an unset variable skips, or fails in CI; a set one is
// returned.
func TestLookup(t *testing.T) {
	t.Setenv("LEASE_TEST_NOTHING", "")
	t.Setenv(testenv.RequireAll, "")
	r := &recorder{TB: t}
	run(func() { testenv.Lookup(r, "LEASE_TEST_NOTHING") })
	if !strings.Contains(r.skipped, "LEASE_TEST_NOTHING") || r.failed != "" {
		t.Errorf("unset: skipped %q, failed %q", r.skipped, r.failed)
	}
	t.Setenv(testenv.RequireAll, "1")
	r = &recorder{TB: t}
	run(func() { testenv.Lookup(r, "LEASE_TEST_NOTHING") })
	if r.skipped != "" || !strings.Contains(r.failed, "LEASE_TEST_NOTHING") {
		t.Errorf("unset in CI: skipped %q, failed %q", r.skipped, r.failed)
	}
	t.Setenv("LEASE_TEST_NOTHING", "x")
	if v := testenv.Lookup(t, "LEASE_TEST_NOTHING"); v != "x" {
		t.Errorf("set: %q", v)
	}
}
