package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/internal/testenv"
)

// A store whose Acquire answers after the lease's Deadline has passed:
// lease run must not start COMMAND on a tenure it can no longer trust. It
// releases the lease and reports a store timeout (exit 1), not a loss.
func TestRunDoesNotStartTheCommandAfterTheDeadline(t *testing.T) {
	testenv.Slow(t)
	// The store's clock stands still, so the tenure stays held in the
	// store until released: the test can see that lease run released it.
	mem := memory.New(memory.WithClock(memory.NewManualClock(time.Now())))
	store := &slowLocker{
		Locker: mem,
		// Answer just after the Deadline (which comes 1% of the ttl plus
		// 2ms before the ttl that bounds the call): late, but not so late
		// that the call is abandoned as unanswered.
		afterAcquire: func(l lease.Lease) { time.Sleep(time.Until(l.Deadline) + 5*time.Millisecond) },
	}
	backend := registerLocker(t, store)
	ran := filepath.Join(t.TempDir(), "ran")

	res := runInProcess(t, "--backend", backend, "run", "--ttl", "2s", "late", "--", "touch", ran)
	if res.code != exitFailure || !oneLineWith(res.stderr) || strings.Contains(res.stderr, "lost") ||
		!(strings.Contains(res.stderr, "too late") || strings.Contains(res.stderr, "in time")) {
		t.Errorf("lease run whose Acquire answered after the Deadline: want exit 1 and one line saying the store answered too late, not that the lease was lost\n%s", res)
	}
	if fileExists(ran) {
		t.Errorf("the command ran although the lease's Deadline had passed when the store answered")
	}
	if store.granted() != 1 {
		t.Fatalf("the store granted %d leases, want the one late Acquire", store.granted())
	}
	if l, err := mem.Inspect(context.Background(), "late"); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("the late tenure was not released: Inspect = %v, %v", l, err)
	}
}

// The command line's own check, whatever lease.Run checks before calling
// it: a command is never started once the lease's Deadline has passed
// (here fn waits past it before starting the command).
func TestCommandNeverStartsPastTheDeadline(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran")
	c := &child{
		argv: []string{"touch", ran},
		fwd:  &forwarder{cancel: func() {}},
		g:    &globals{stdout: io.Discard, stderr: io.Discard, given: map[string]string{}},
	}
	err := lease.Run(context.Background(), memory.New(), "late", 300*time.Millisecond, func(ctx context.Context) error {
		held, _ := lease.FromContext(ctx)
		time.Sleep(time.Until(held.Deadline) + 10*time.Millisecond)
		return c.run(ctx)
	}, lease.WithoutRenewal())
	if fileExists(ran) {
		t.Errorf("the command started after the lease's Deadline")
	}
	if !errors.Is(c.notStarted, errTooLate) {
		t.Errorf("the command was not refused as too late: notStarted = %v (Run: %v)", c.notStarted, err)
	}
	var ee *exitError
	if out := c.outcome("late", err); !errors.As(out, &ee) || ee.code != exitFailure || !strings.Contains(ee.msg, "too late") || strings.Contains(ee.msg, "lost") {
		t.Errorf("outcome: %v, want exit 1 saying the store answered too late", out)
	}
}
