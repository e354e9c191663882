// Package testenv finds the external servers that this module's tests run
// against, and turns a missing one into a skip, or into a failure in CI.
//
// Each server's address comes from an environment variable:
//
//	LEASE_TEST_POSTGRES  PostgreSQL URL, e.g. postgres://postgres@127.0.0.1:5432/test
//	LEASE_TEST_MYSQL     MySQL/MariaDB DSN URL, e.g. mysql://root@127.0.0.1:3306/test
//	LEASE_TEST_REDIS     Redis URL, e.g. redis://127.0.0.1:6379/0
//	LEASE_TEST_ETCD      etcd endpoints, e.g. 127.0.0.1:2379
//
// When LEASE_TEST_REQUIRE_ALL is set to 1, a test that would skip for a
// missing variable fails instead, so CI cannot silently stop testing a
// backend. The same rule holds for a missing program (RequireBinary) or
// anything else a test cannot run without (Unavailable).
package testenv

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
)

// RequireAll is the variable that turns every skip for a missing server
// into a failure.
const RequireAll = "LEASE_TEST_REQUIRE_ALL"

// Lookup returns the value of the environment variable env. When it is
// unset or empty, it skips t with a message naming the variable, or fails
// t when LEASE_TEST_REQUIRE_ALL=1.
func Lookup(t testing.TB, env string) string {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		return v
	}
	if os.Getenv(RequireAll) == "1" {
		t.Fatalf("%s is not set and %s=1: this test needs a real server and must not be skipped", env, RequireAll)
	}
	t.Skipf("%s is not set: skipping the test against a real server (set it, e.g. as .ci/run does, to run it)", env)
	return ""
}

// Unavailable reports that something a test needs is missing from this
// machine (a program, a user, a package): it skips t with the message, or
// fails t when LEASE_TEST_REQUIRE_ALL=1, so that CI cannot silently stop
// running the test. The message should say how to get what is missing.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(RequireAll) == "1" {
		t.Fatalf("%s (and %s=1: this test must not be skipped)", msg, RequireAll)
	}
	t.Skip(msg)
}

// RequireBinary returns the path of the program name, looked up in PATH.
// When it is missing it calls Unavailable with a message naming the Debian
// package that provides it, so the test skips, or fails in CI.
func RequireBinary(t testing.TB, name, debianPackage string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Unavailable(t, "%s is not installed: install the Debian package %s (apt-get install -y %s) to run this test", name, debianPackage, debianPackage)
		return ""
	}
	return path
}

// Slow skips t under go test -short, the quick edit-and-test loop, with a
// message that says so; a run without -short (and CI) runs it. Tests that
// start server processes, wait out real ttls or failovers, or run a whole
// suite call it first.
func Slow(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow: skipped with -short; go test without -short runs it")
	}
}

// DefaultParallel raises go test's -parallel to at least n unless the
// command line sets it. Call it in TestMain before m.Run (it parses the
// flags). Most of this module's parallel tests wait (on ttls, servers and
// child processes) far more than they compute, and the default,
// GOMAXPROCS, would run only two at once on a 2-CPU machine.
func DefaultParallel(n int) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit && runtime.GOMAXPROCS(0) < n {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic(err)
		}
	}
}
