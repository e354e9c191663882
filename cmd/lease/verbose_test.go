package main

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
)

// TestRunVerboseLogs checks that lease run -v logs, on stderr through
// log/slog, the lease acquired, each renewal with its slack, and its
// release; and nothing without -v.
func TestRunVerboseLogs(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the command is sh")
	}
	mem := memory.New()
	defer mem.Close()
	u := registerLocker(t, mem)
	res := runInProcess(t, "--backend", u, "run", "-v", "--ttl", "3s", "--renew-every", "100ms", "--owner", "me", "logged", "--", "sh", "-c", "sleep 0.5")
	if res.code != 0 {
		t.Fatalf("run -v: want exit 0\n%s", res)
	}
	for _, want := range []string{
		`msg="lease acquired"`, `lease.name=logged`, `lease.owner=me`,
		`msg="lease renewed"`, `lease.slack=`,
		`msg="lease released"`,
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("run -v: stderr lacks %q\n%s", want, res)
		}
	}
	if n := strings.Count(res.stderr, `msg="lease renewed"`); n < 1 {
		t.Errorf("run -v: %d renewals logged, want at least one", n)
	}
	for _, line := range strings.Split(strings.TrimSpace(res.stderr), "\n") {
		if !strings.HasPrefix(line, "time=") {
			t.Errorf("run -v: stderr line %q is not a log/slog text line", line)
		}
	}

	res = runInProcess(t, "--backend", u, "run", "--ttl", "3s", "--renew-every", "100ms", "quiet", "--", "sh", "-c", "sleep 0.3")
	if res.code != 0 || res.stderr != "" {
		t.Errorf("run without -v: want nothing on stderr\n%s", res)
	}
	res = runInProcess(t, "--backend", u, "run", "--verbose", "--ttl", "3s", "long", "--", "true")
	if res.code != 0 || !strings.Contains(res.stderr, `msg="lease acquired"`) {
		t.Errorf("run --verbose: want the log\n%s", res)
	}
}

// losingLocker loses every tenure at its first Renew: another owner's
// operator force-released it.
type losingLocker struct {
	*memory.Locker
	renews atomic.Int32
}

func (s *losingLocker) Renew(ctx context.Context, l lease.Lease, ttl time.Duration) (lease.Lease, error) {
	s.renews.Add(1)
	if _, err := s.ForceRelease(ctx, l.Name); err != nil {
		return lease.Lease{}, err
	}
	return s.Locker.Renew(ctx, l, ttl)
}

// TestRunVerboseLogsLoss checks that lease run -v logs the loss of the
// lease at Error.
func TestRunVerboseLogsLoss(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the command is sh")
	}
	mem := &losingLocker{Locker: memory.New()}
	defer mem.Close()
	u := registerLocker(t, mem)
	res := runInProcess(t, "--backend", u, "run", "-v", "--ttl", "3s", "--renew-every", "100ms", "--grace", "500ms", "doomed", "--", "sh", "-c", "sleep 30")
	if res.code != exitLost {
		t.Fatalf("run -v losing its lease: want exit %d\n%s", exitLost, res)
	}
	if !strings.Contains(res.stderr, `level=ERROR msg="lease lost"`) {
		t.Errorf("run -v: the loss is not logged at Error\n%s", res)
	}
	if mem.renews.Load() == 0 {
		t.Error("no Renew was tried")
	}
}
