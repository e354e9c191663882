package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/syncbuf"
)

// Some tests run the command line in this process, against a Locker the
// test builds and wraps (a store that answers late, or stops answering),
// so that they can read the lease's Deadline exactly. The "testlocker"
// scheme exists only in the test binary: testlocker://NAME opens the
// Locker registered as NAME.

var (
	testLockersMu sync.Mutex
	testLockers   = map[string]lease.Locker{}
	testLockerSeq atomic.Int64
)

func init() {
	lease.Register("testlocker", func(ctx context.Context, u *url.URL) (lease.Locker, error) {
		testLockersMu.Lock()
		defer testLockersMu.Unlock()
		l, ok := testLockers[u.Host]
		if !ok {
			return nil, fmt.Errorf("%w: no test Locker %q", lease.ErrInvalid, u.Host)
		}
		return noClose{l}, nil
	})
}

// registerLocker makes l available as the URL it returns, for the test's
// lifetime.
func registerLocker(t *testing.T, l lease.Locker) string {
	name := fmt.Sprintf("l%d", testLockerSeq.Add(1))
	testLockersMu.Lock()
	testLockers[name] = l
	testLockersMu.Unlock()
	t.Cleanup(func() {
		testLockersMu.Lock()
		delete(testLockers, name)
		testLockersMu.Unlock()
	})
	return "testlocker://" + name
}

// noClose keeps the test's store open when the command closes it.
type noClose struct{ lease.Locker }

func (noClose) Close() error { return nil }

// slowLocker wraps a store: it records the Deadline of every lease the
// store grants, and can make Acquire answer late or Renew never answer.
type slowLocker struct {
	lease.Locker
	// afterAcquire, if set, runs after a successful Acquire, before it
	// returns: a store whose answer is slow to arrive.
	afterAcquire func(l lease.Lease)
	// stallRenew makes every Renew wait for its context to end.
	stallRenew bool

	mu        sync.Mutex
	deadlines []time.Time
}

func (s *slowLocker) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	l, err := s.Locker.Acquire(ctx, name, owner, ttl)
	if err == nil {
		s.record(l)
		if s.afterAcquire != nil {
			s.afterAcquire(l)
		}
	}
	return l, err
}

func (s *slowLocker) Renew(ctx context.Context, l lease.Lease, ttl time.Duration) (lease.Lease, error) {
	if s.stallRenew {
		<-ctx.Done()
		return lease.Lease{}, fmt.Errorf("test store does not answer: %w", ctx.Err())
	}
	got, err := s.Locker.Renew(ctx, l, ttl)
	if err == nil {
		s.record(got)
	}
	return got, err
}

func (s *slowLocker) record(l lease.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deadlines = append(s.deadlines, l.Deadline)
}

// granted is how many leases the store granted (acquired or renewed).
func (s *slowLocker) granted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.deadlines)
}

// runInProcess runs the command line args in this process, as main would,
// and returns how it ended. Only one runs at a time: the command line
// handles this process's signals while it runs.
func runInProcess(t *testing.T, args ...string) result {
	t.Helper()
	inProcessMu.Lock()
	defer inProcessMu.Unlock()
	var stdout, stderr syncbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := run(ctx, args, &stdout, &stderr)
	code := report(err, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

var inProcessMu sync.Mutex

// oneLineWith reports whether s is exactly one line that starts with
// "lease: " and contains every one of subs.
func oneLineWith(s string, subs ...string) bool {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "lease: ") {
		return false
	}
	return containsAll(lines[0], subs...)
}

func containsAll(line string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(line, sub) {
			return false
		}
	}
	return true
}
