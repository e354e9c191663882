package driver_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// mapStore is a toy Store: one process, the system clock. It shows the
// whole of what a backend writes; NewLocker does the rest.
type mapStore struct {
	mu     sync.Mutex
	token  uint64
	leases map[string]driver.Tenure
}

func (s *mapStore) current(name string) (driver.Tenure, bool) {
	t, ok := s.leases[name]
	if ok && !time.Now().Before(t.Expires) {
		delete(s.leases, name)
		ok = false
	}
	t.Remaining = time.Until(t.Expires)
	return t, ok
}

func (s *mapStore) Acquire(_ context.Context, name, owner string, ttl time.Duration) (driver.Tenure, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, held := s.current(name)
	if held && t.Owner != owner {
		return t, nil // the Locker turns this into a *lease.HeldError
	}
	if !held {
		s.token++
		t = driver.Tenure{Name: name, Owner: owner, Token: s.token}
	}
	t.Expires = time.Now().Add(ttl)
	s.leases[name] = t
	return t, nil
}

func (s *mapStore) Renew(_ context.Context, want driver.Tenure, ttl time.Duration) (driver.Tenure, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, held := s.current(want.Name)
	if !held || t.Owner != want.Owner || t.Token != want.Token {
		return driver.Tenure{}, false, nil // the Locker reports lease.ErrLost
	}
	t.Expires = time.Now().Add(ttl)
	s.leases[want.Name] = t
	return t, true, nil
}

func (s *mapStore) Release(_ context.Context, want driver.Tenure) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, held := s.current(want.Name)
	if !held || t.Owner != want.Owner || t.Token != want.Token {
		return false, nil
	}
	delete(s.leases, want.Name)
	return true, nil
}

func (s *mapStore) Inspect(_ context.Context, name string) (driver.Tenure, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, held := s.current(name)
	return t, held, nil
}

func (s *mapStore) Close() error { return nil }

// A backend is a Store wrapped by NewLocker: validation, the closed state,
// Deadlines and error shapes come from the Locker.
func ExampleNewLocker() {
	l := driver.NewLocker("toy", &mapStore{leases: map[string]driver.Tenure{}})
	defer l.Close()
	ctx := context.Background()

	held, _ := l.Acquire(ctx, "report", "worker-1", time.Minute)
	fmt.Println("token", held.Token, "valid", held.Valid())

	_, err := l.Acquire(ctx, "report", "worker-2", time.Minute)
	fmt.Println(errors.Is(err, lease.ErrHeld))

	_, err = l.Acquire(ctx, "", "worker-2", time.Minute)
	fmt.Println(err)

	_ = l.Release(ctx, held)
	fmt.Println(l.Release(ctx, held))
	// Output:
	// token 1 valid true
	// true
	// lease/toy: acquire: lease: invalid argument: name is empty
	// lease/toy: release "report" token 1: lease: lost
}
