package driver_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// lateStore is a one-process store with re-entrant Acquire whose next
// Release can be held back: the caller gets an error, and the Release is
// applied when the test says, as a request that waited in a stopped
// server would be.
type lateStore struct {
	mu      sync.Mutex
	tenures map[string]driver.Tenure
	token   uint64
	holdRel bool
	late    func() bool // the held-back Release
}

func (s *lateStore) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (driver.Tenure, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.tenures[name]; ok {
		if t.Owner != owner {
			return driver.Tenure{Owner: t.Owner, Remaining: time.Second}, nil
		}
		return t, nil // re-entrant: same token
	}
	s.token++
	t := driver.Tenure{Name: name, Owner: owner, Token: s.token, Expires: time.Now().Add(ttl)}
	s.tenures[name] = t
	return t, nil
}

func (s *lateStore) Renew(ctx context.Context, t driver.Tenure, ttl time.Duration) (driver.Tenure, bool, error) {
	return driver.Tenure{}, false, errors.ErrUnsupported
}

func (s *lateStore) release(t driver.Tenure) bool {
	cur, ok := s.tenures[t.Name]
	if !ok || cur.Owner != t.Owner || cur.Token != t.Token {
		return false
	}
	delete(s.tenures, t.Name)
	return true
}

func (s *lateStore) Release(ctx context.Context, t driver.Tenure) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holdRel {
		s.holdRel = false
		s.late = func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.release(t)
		}
		return false, errors.New("test: the reply did not come")
	}
	return s.release(t), nil
}

func (s *lateStore) Inspect(ctx context.Context, name string) (driver.Tenure, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tenures[name]
	return t, ok, nil
}

func (s *lateStore) Close() error { return nil }

// TestAcquireDoesNotReenterATenureWhoseReleaseIsInDoubt: a Release that
// failed without an answer may be applied late. An Acquire of the same
// owner must then not return that tenure (re-entered, with its token),
// which the late Release would end under a holder trusting its
// Deadline: it gets a new tenure, with a larger token, which the late
// Release cannot match. (Found by etcd's TestClusterFailuresDuringContention,
// where the Release went to a stopped member and was applied when it
// resumed.)
func TestAcquireDoesNotReenterATenureWhoseReleaseIsInDoubt(t *testing.T) {
	ctx := context.Background()
	s := &lateStore{tenures: map[string]driver.Tenure{}}
	l := driver.NewLocker("late", s)
	first, err := l.Acquire(ctx, "job", "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s.holdRel = true
	if err := l.Release(ctx, first); err == nil || errors.Is(err, lease.ErrLost) {
		t.Fatalf("Release without an answer = %v; want a store error", err)
	}
	next, err := l.Acquire(ctx, "job", "me", time.Minute)
	if err != nil {
		t.Fatalf("Acquire after the Release in doubt: %v", err)
	}
	if next.Token <= first.Token {
		t.Fatalf("Acquire after the Release in doubt got token %d; want a new tenure, above %d", next.Token, first.Token)
	}
	if s.late() {
		t.Fatal("the late Release ended a tenure")
	}
	got, err := l.Inspect(ctx, "job")
	if err != nil || got.Token != next.Token {
		t.Fatalf("after the late Release, Inspect = %v, %v; want the new tenure %d", got, err, next.Token)
	}
	// The doubt is settled: re-entering the new tenure keeps its token.
	again, err := l.Acquire(ctx, "job", "me", time.Minute)
	if err != nil || again.Token != next.Token {
		t.Fatalf("re-entrant Acquire = %v, %v; want token %d", again, err, next.Token)
	}
	// A Release that gets an answer leaves no doubt behind.
	if err := l.Release(ctx, again); err != nil {
		t.Fatal(err)
	}
	third, err := l.Acquire(ctx, "job", "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := l.Acquire(ctx, "job", "me", time.Minute); err != nil || again.Token != third.Token {
		t.Fatalf("re-entrant Acquire after an answered Release = %v, %v; want token %d", again, err, third.Token)
	}
}
