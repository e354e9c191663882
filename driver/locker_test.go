package driver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stub is a Store whose every answer the test sets.
type stub struct {
	tenure  driver.Tenure
	ok      bool
	err     error
	block   bool // wait for the context to end, then return err
	calls   int
	closeFn func() error
}

func (s *stub) answer(ctx context.Context) error {
	s.calls++
	if s.block {
		<-ctx.Done()
	}
	return s.err
}

func (s *stub) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (driver.Tenure, error) {
	return s.tenure, s.answer(ctx)
}
func (s *stub) Renew(ctx context.Context, t driver.Tenure, ttl time.Duration) (driver.Tenure, bool, error) {
	return s.tenure, s.ok, s.answer(ctx)
}
func (s *stub) Release(ctx context.Context, t driver.Tenure) (bool, error) {
	return s.ok, s.answer(ctx)
}
func (s *stub) Inspect(ctx context.Context, name string) (driver.Tenure, bool, error) {
	return s.tenure, s.ok, s.answer(ctx)
}
func (s *stub) Close() error {
	if s.closeFn != nil {
		return s.closeFn()
	}
	return nil
}

var held = lease.Lease{Name: "job", Owner: "me", Token: 7}

func TestLockerTurnsOutcomesIntoSentinels(t *testing.T) {
	ctx := context.Background()
	s := &stub{tenure: driver.Tenure{Owner: "other", Token: 3, Remaining: 2 * time.Second}}
	l := driver.NewLocker("stub", s)
	_, err := l.Acquire(ctx, "job", "me", time.Minute)
	var he *lease.HeldError
	if !errors.As(err, &he) || he.Owner != "other" || he.Name != "job" || he.Remaining != 2*time.Second {
		t.Fatalf("Acquire while another holds = %v, want a *HeldError naming the holder", err)
	}
	if _, err := l.Renew(ctx, held, time.Minute); !errors.Is(err, lease.ErrLost) || err.Error() != `lease/stub: renew "job" token 7: lease: lost` {
		t.Fatalf("Renew of a lost tenure = %v", err)
	}
	if err := l.Release(ctx, held); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Release of a lost tenure = %v", err)
	}
	if _, err := l.Inspect(ctx, "job"); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Inspect of a free name = %v", err)
	}
	if _, err := l.List(ctx, ""); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("List on a Store without Lister = %v, want errors.ErrUnsupported", err)
	}
	if _, err := l.ForceRelease(ctx, "job"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("ForceRelease on a Store without ForceReleaser = %v, want errors.ErrUnsupported", err)
	}
}

func TestLockerStampsTheDeadlineBeforeTheRequest(t *testing.T) {
	s := &stub{tenure: driver.Tenure{Owner: "me", Token: 9, Expires: time.Now().Add(time.Minute)}}
	l := driver.NewLocker("stub", s)
	start := time.Now()
	got, err := l.Acquire(context.Background(), "job", "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "job" || got.Token != 9 || got.Deadline.Before(start.Add(time.Minute-lease.DriftMargin(time.Minute))) ||
		got.Deadline.After(time.Now().Add(time.Minute-lease.DriftMargin(time.Minute))) {
		t.Fatalf("Acquire = %+v", got)
	}
}

func TestLockerNeverCallsTheStoreWithBadInputOrAfterClose(t *testing.T) {
	s := &stub{}
	l := driver.NewLocker("stub", s)
	ctx := context.Background()
	if _, err := l.Acquire(ctx, "", "me", time.Minute); !errors.Is(err, lease.ErrInvalid) || !strings.HasPrefix(err.Error(), "lease/stub: acquire: ") {
		t.Fatalf("Acquire with an empty name = %v", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Inspect(canceled, "job"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Inspect with a canceled context = %v", err)
	}
	closes := 0
	s.closeFn = func() error { closes++; return nil }
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil || closes != 1 {
		t.Fatalf("second Close = %v, Store closed %d times; want nil and once", err, closes)
	}
	if err := l.Release(ctx, held); !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("Release after Close = %v", err)
	}
	if s.calls != 0 {
		t.Fatalf("the Store was called %d times", s.calls)
	}
}

func TestLockerShapesStoreErrors(t *testing.T) {
	driverErr := errors.New("connection reset")
	s := &stub{err: driverErr}
	l := driver.NewLocker("stub", s)

	_, err := l.Acquire(context.Background(), "job", "me", time.Minute)
	if !errors.Is(err, driverErr) || err.Error() != `lease/stub: acquire "job": connection reset` {
		t.Fatalf("Acquire with a driver error = %v", err)
	}

	// A Store that returns a lease sentinel would disguise a failure as an
	// outcome: the Locker keeps the text and drops the match.
	s.err = errors.Join(errors.New("bad reply"), lease.ErrLost)
	if _, err := l.Renew(context.Background(), held, time.Minute); errors.Is(err, lease.ErrLost) {
		t.Fatalf("a Store's error matching ErrLost came through as %v", err)
	}

	// An ended context makes the error match it, whatever the driver said.
	s.err, s.block = driverErr, true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := l.Inspect(ctx, "job"); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, driverErr) {
		t.Fatalf("Inspect whose context ended = %v, want both the context's and the driver's error", err)
	}
}

func TestLockerRefusesNonsenseFromTheStore(t *testing.T) {
	s := &stub{tenure: driver.Tenure{Owner: "me"}} // token 0
	l := driver.NewLocker("stub", s)
	if _, err := l.Acquire(context.Background(), "job", "me", time.Minute); err == nil || !strings.Contains(err.Error(), "token 0") {
		t.Fatalf("Acquire answered with token 0 = %v", err)
	}
}

func TestQuoteCutsLongNames(t *testing.T) {
	long := strings.Repeat("é", 600)
	q := driver.Quote(long)
	if len(q) > 100 || !strings.Contains(q, "1200 bytes") {
		t.Fatalf("Quote of a 1200-byte name = %s", q)
	}
}
