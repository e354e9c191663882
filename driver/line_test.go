package driver_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/batchtest"
	"github.com/leasekit/lease/internal/line"
)

// watchingStub is a stub that has Watcher's method but, as a Capable
// store, says it cannot watch (the SQL store without a Listener).
type watchingStub struct{ stub }

func (s *watchingStub) Watch(ctx context.Context, name string) (driver.Watch, error) {
	return nil, errors.ErrUnsupported
}

func (s *watchingStub) Can(p any) bool {
	_, watch := p.(*driver.Watcher)
	return !watch
}

// lease.Can answers as the store can, where a type assertion on the
// Locker cannot.
func TestCanAnswersAsTheStoreCan(t *testing.T) {
	plain := driver.NewLocker("stub", &stub{})
	capable := driver.NewLocker("stub", &watchingStub{})
	mem := memory.New()
	for _, c := range []struct {
		what string
		got  bool
		want bool
	}{
		{"Lister on a store without List", lease.Can[lease.Lister](plain), false},
		{"ForceReleaser on a store without ForceRelease", lease.Can[lease.ForceReleaser](plain), false},
		{"Watcher on a store without Watch", lease.Can[driver.Watcher](plain), false},
		{"Watcher on a store that has Watch but says it cannot", lease.Can[driver.Watcher](capable), false},
		{"BatchRenewer (one at a time without a batch store)", lease.Can[batchtest.Batcher](plain), true},
		{"Lister on memory", lease.Can[lease.Lister](mem), true},
		{"Watcher on memory", lease.Can[driver.Watcher](mem), true},
		{"Can asked directly of an interface the Locker has not", plain.Can((*io.Reader)(nil)), false},
		{"Can asked directly of a nil", plain.Can(nil), false},
	} {
		if c.got != c.want {
			t.Errorf("lease.Can, %s = %v, want %v", c.what, c.got, c.want)
		}
	}
	// The type assertions are true all the same: the methods are there.
	if _, ok := any(plain).(driver.Watcher); !ok {
		t.Error("driver.Locker is not a Watcher")
	}
}

// A fair wait on a store that keeps no line fails at once, naming the
// option and the store, and never reaches the store.
func TestFairWaitWithoutALineFailsAtOnce(t *testing.T) {
	s := &stub{tenure: driver.Tenure{Owner: "me", Token: 1, Expires: time.Now().Add(time.Minute)}}
	l := driver.NewLocker("stub", s)
	w := line.New(true, time.Second)
	defer w.Done(false)
	_, err := l.Acquire(line.NewContext(context.Background(), w), "job", "me", time.Minute)
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "WithFairWait") || !strings.Contains(err.Error(), "lease/stub") {
		t.Fatalf("fair Acquire on a store without a line = %v; want ErrUnsupported naming WithFairWait and lease/stub", err)
	}
	if s.calls != 0 {
		t.Fatalf("the store was called %d times", s.calls)
	}
	// A woken (not fair) wait acquires plainly: the caller polls.
	w2 := line.New(false, time.Second)
	defer w2.Done(true)
	if _, err := l.Acquire(line.NewContext(context.Background(), w2), "job", "me", time.Minute); err != nil {
		t.Fatalf("waiting Acquire on a store without a line = %v", err)
	}
	if w2.Taken() {
		t.Fatal("a Locker without a line took the wait")
	}
}

// Within one Locker only the first waiter asks the store; the others are
// answered "held" from its last answer, and the next becomes first when
// it leaves.
func TestOnlyTheHeadAsksTheStore(t *testing.T) {
	l := memory.New()
	ctx := context.Background()
	held, err := l.Acquire(ctx, "job", "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a, b := line.New(false, time.Second), line.New(false, time.Second)
	defer b.Done(false)
	if _, err := l.Acquire(line.NewContext(ctx, a), "job", "a", time.Minute); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("a = %v", err)
	}
	_, err = l.Acquire(line.NewContext(ctx, b), "job", "b", time.Minute)
	var he *lease.HeldError
	if !errors.As(err, &he) || he.Owner != "holder" {
		t.Fatalf("b, behind a = %v; want held by holder", err)
	}
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	// b is not first: it is still told the name is held, without asking.
	if _, err := l.Acquire(line.NewContext(ctx, b), "job", "b", time.Minute); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("b, behind a, after the release = %v; want ErrHeld (only the first waiter asks)", err)
	}
	select {
	case <-a.Changed():
	case <-time.After(5 * time.Second):
		t.Fatal("the first waiter was not woken by the release")
	}
	a.Done(false) // a gives up: b is first, and woken at once
	select {
	case <-b.Changed():
	case <-time.After(5 * time.Second):
		t.Fatal("the next waiter was not woken when the first gave up")
	}
	got, err := l.Acquire(line.NewContext(ctx, b), "job", "b", time.Minute)
	if err != nil {
		t.Fatalf("b, first now = %v", err)
	}
	_ = l.Release(ctx, got)
}

// flakyWatchStore is a store that keeps a line but whose first turn
// watch fails (a pub/sub connection that did not come up): the name is
// held by another owner.
type flakyWatchStore struct {
	stub
	watches int
}

func (s *flakyWatchStore) Watch(ctx context.Context, name string) (driver.Watch, error) {
	return nil, errors.ErrUnsupported
}

func (s *flakyWatchStore) WatchTurn(ctx context.Context, name, waiter string) (driver.Watch, error) {
	s.watches++
	if s.watches == 1 {
		return nil, errors.New("pub/sub connection refused")
	}
	return &stubWatch{Signal: driver.NewSignal()}, nil
}

func (s *flakyWatchStore) AcquireOrWait(ctx context.Context, name, owner string, ttl time.Duration, m driver.Mark) (driver.Tenure, error) {
	return driver.Tenure{Owner: "other", Token: 1, Expires: time.Now().Add(time.Minute), Remaining: time.Minute}, nil
}

func (s *flakyWatchStore) StopWaiting(ctx context.Context, name, waiter string) error { return nil }

type stubWatch struct{ driver.Signal }

func (stubWatch) Stop() {}

// A turn watch that fails to come up does not fail the waiting Acquire:
// it answers as the store does, and the next attempt sets the watch up.
func TestAFailedTurnWatchIsTriedAgain(t *testing.T) {
	s := &flakyWatchStore{}
	l := driver.NewLocker("stub", s)
	defer l.Close()
	w := line.New(false, time.Second)
	defer w.Done(false)
	ctx := line.NewContext(context.Background(), w)
	for i := range 2 {
		if _, err := l.Acquire(ctx, "job", "me", time.Minute); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("attempt %d: %v, want ErrHeld (the watch's failure is not the attempt's)", i, err)
		}
	}
	if s.watches != 2 {
		t.Fatalf("%d turn watches set up, want 2: the failed one is tried again at the next attempt", s.watches)
	}
}
