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
// backend.
package testenv

import (
	"os"
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
