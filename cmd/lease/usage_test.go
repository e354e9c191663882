package main

import (
	"strings"
	"testing"

	"github.com/leasekit/lease/internal/testenv"
)

// Mistakes get one "lease: ..." line and exit 2; never a stack trace.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	for _, args := range [][]string{
		{"bogus"},
		{"run"},
		{"run", "name"},
		{"run", "name", "--ttl", "5s", "--", "true"},
		{"run", "--ttl", "-1s", "name", "--", "true"},
		{"run", "--renew-every", "1m", "--ttl", "30s", "name", "--", "true"},
		{"run", "--conflict-exit-code", "300", "name", "--", "true"},
		{"run", "--ttl", "30x", "name", "--", "true"},
		{"run", "--ttl", "10s", "--grace", "10s", "name", "--", "true"},
		{"run", "--ttl", "30s", "--renew-every", "15s", "--grace", "15s", "name", "--", "true"},
		{"run", "--slots", "-1", "name", "--", "true"},
		{"run", "--slots", "1025", "name", "--", "true"},
		{"run", "--slots", "two", "name", "--", "true"},
		{"run", "lease.semaphore/name#0", "--", "true"},
		{"run", "--slots", "100", strings.Repeat("n", 1010), "--", "true"},
		{"status"},
		{"status", "--slots", "-1", "name"},
		{"release", "name"},
		{"list", "a", "b"},
		{"check", "mem://", "mem://"},
		{"--backend", "nosuchscheme://x", "status", "name"},
		{"--backend", "://", "status", "name"},
		{"--backend", db + "?nosuchoption=1", "status", "name"},
	} {
		res := runLease(t, nil, args...)
		lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
		if res.code != exitUsage || len(lines) != 1 || !strings.HasPrefix(lines[0], "lease: ") {
			t.Errorf("lease %s: want exit 2 and one line \"lease: ...\" on stderr\n%s", strings.Join(args, " "), res)
		}
	}
	// A slot name without --slots says why it is refused.
	res := runLease(t, nil, "run", "lease.semaphore/name#0", "--", "true")
	if res.code != exitUsage || !oneLineWith(res.stderr, "reserved for the slots of semaphores", "--slots") {
		t.Errorf("lease run lease.semaphore/name#0: want exit 2 and one line saying the name is reserved\n%s", res)
	}
	// A grace that does not fit in the lease names both values.
	res = runLease(t, nil, "run", "--ttl", "10s", "--grace", "8s", "name", "--", "true")
	if res.code != exitUsage || !oneLineWith(res.stderr, "--grace 8s", "--ttl 10s") {
		t.Errorf("lease run --ttl 10s --grace 8s: want exit 2 and one line naming both\n%s", res)
	}
}

func TestUnreachableStoreIsOneLine(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	const down = "redis://127.0.0.1:1/0" // nothing listens on port 1
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--backend", down, "status", "name"}, exitFailure},
		{[]string{"--backend", down, "run", "name", "--", "true"}, exitFailure},
		{[]string{"check", down}, exitUntested}, // could not test the store
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			res := runLease(t, nil, tc.args...)
			lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
			if res.code != tc.code || len(lines) != 1 || !strings.HasPrefix(lines[0], "lease: ") {
				t.Errorf("lease %s on an unreachable store: want exit %d and one line\n%s", strings.Join(tc.args, " "), tc.code, res)
			}
		})
	}
}

// etcd's client retries an unreachable cluster for as long as its context
// allows: the one-shot commands must give up after --timeout, and run after
// one ttl, with one line, instead of hanging.
func TestUnansweringStoreTimesOutWithOneLine(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	const down = "etcd://127.0.0.1:1" // nothing listens on port 1
	for _, args := range [][]string{
		{"--backend", down, "--timeout", "1s", "status", "name"},
		{"--backend", down, "list", "--timeout", "1s"},
		{"--backend", down, "--timeout", "1s", "release", "--force", "name"},
		{"--backend", down, "run", "--ttl", "1s", "name", "--", "true"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			res := runLease(t, nil, args...)
			lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
			if res.code != exitFailure || len(lines) != 1 || !strings.Contains(lines[0], "did not answer in time") {
				t.Errorf("lease %s on a store that never answers: want exit 1 and one line saying it did not answer\n%s", strings.Join(args, " "), res)
			}
		})
	}
}
