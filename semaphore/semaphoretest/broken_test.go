package semaphoretest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/semaphore/semaphoretest"
)

// Each broken store breaks one promise; the suite must fail it, in the
// case named for that promise (other cases may fail too).
var brokenModes = map[string]string{
	"two-holders":     "never more than N holders at once",
	"token-restarts":  "tokens strictly increase per slot",
	"never-expires":   "a crashed holder's slot frees within the ttl plus the expiry lag",
	"release-ignored": "a waiter gets a freed slot",
	"renew-no-op":     "capacity changes keep the rule",
}

// toyTTL is short: the toy answers at once, and the cases that wait for
// an expiry then wait little.
const toyTTL = 100 * time.Millisecond

func toyHarness(mode string) semaphoretest.Harness {
	store := &toyStore{mode: mode, leases: map[string]toyTenure{}, tokens: map[string]uint64{}}
	return semaphoretest.Harness{
		New:     func(testing.TB) lease.Locker { return &toy{toyStore: store} },
		TTL:     toyTTL,
		Timeout: 20 * time.Second,
	}
}

func TestSuiteCatchesBrokenStores(t *testing.T) {
	for mode, want := range brokenModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			var failed []string
			found := false
			for _, r := range semaphoretest.Check(t.Context(), toyHarness(mode)) {
				if r.Outcome == semaphoretest.Failed {
					failed = append(failed, r.Case)
					found = found || r.Case == want
				}
			}
			switch {
			case len(failed) == 0:
				t.Fatalf("the suite passed a store broken by %q", mode)
			case !found:
				t.Fatalf("the suite failed the %q store, but not in case %q; it failed:\n%s", mode, want, strings.Join(failed, "\n"))
			}
		})
	}
}

func TestBrokenModesNameRealCases(t *testing.T) {
	names := map[string]bool{}
	for _, c := range semaphoretest.Cases() {
		names[c.Name] = true
	}
	for mode, want := range brokenModes {
		if !names[want] {
			t.Errorf("broken mode %q expects a failure in %q, which is not a case of the suite", mode, want)
		}
	}
	covered := map[string]bool{}
	for _, want := range brokenModes {
		covered[want] = true
	}
	for name := range names {
		if !covered[name] {
			t.Errorf("no broken mode shows case %q failing", name)
		}
	}
}

// TestToyStorePasses shows the toy passes when nothing is broken, so each
// failure above is the broken promise's doing; it also runs the suite
// through Check, which reports one Result per case.
func TestToyStorePasses(t *testing.T) {
	t.Parallel()
	results := semaphoretest.Check(t.Context(), toyHarness(""))
	if len(results) != len(semaphoretest.Cases()) {
		t.Fatalf("Check returned %d results for %d cases", len(results), len(semaphoretest.Cases()))
	}
	for i, r := range results {
		if r.Case != semaphoretest.Cases()[i].Name {
			t.Errorf("result %d is for %q, want %q", i, r.Case, semaphoretest.Cases()[i].Name)
		}
		if r.Outcome != semaphoretest.Passed {
			t.Errorf("%s: %s: %s", r.Case, r.Outcome, r.Reason)
		}
	}
}

// TestRunOnToyStore runs the suite as subtests, as a store's tests do.
func TestRunOnToyStore(t *testing.T) {
	semaphoretest.Run(t, toyHarness(""))
}

// toyStore is a small Locker's store on this process's clock, with one
// promise broken by mode ("" for none). It implements only lease.Locker:
// waiters poll it.
type toyStore struct {
	mode   string
	mu     sync.Mutex
	leases map[string]toyTenure
	tokens map[string]uint64
}

type toyTenure struct {
	owner    string
	token    uint64
	acquired time.Time
	expires  time.Time
}

// toy is one connection to a toyStore; Close plays a crash: its tenures
// stay until they expire.
type toy struct {
	*toyStore
	closed atomic.Bool
}

func (s *toyStore) held(name string, now time.Time) (toyTenure, bool) {
	cur, ok := s.leases[name]
	if ok && (s.mode == "never-expires" || now.Before(cur.expires)) {
		return cur, true
	}
	return toyTenure{}, false
}

func (s *toyStore) view(name string, cur toyTenure) lease.Lease {
	return lease.Lease{Name: name, Owner: cur.owner, Token: cur.token, Acquired: cur.acquired, Expires: cur.expires}
}

func (t *toy) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	if err := t.ready(ctx); err != nil {
		return lease.Lease{}, err
	}
	if err := driver.CheckAcquire(name, owner, ttl); err != nil {
		return lease.Lease{}, err
	}
	start := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, ok := t.held(name, start)
	switch {
	case ok && cur.owner == owner:
		cur.expires = start.Add(ttl)
		t.leases[name] = cur
	case ok && t.mode != "two-holders":
		return lease.Lease{}, &lease.HeldError{Name: name, Owner: cur.owner, Remaining: cur.expires.Sub(start)}
	case ok:
		// two-holders: grant it, leaving the holder in place.
		t.tokens[name]++
		cur = toyTenure{owner: owner, token: t.tokens[name], acquired: start, expires: start.Add(ttl)}
	default:
		t.tokens[name]++
		cur = toyTenure{owner: owner, token: t.tokens[name], acquired: start, expires: start.Add(ttl)}
		t.leases[name] = cur
	}
	l := t.view(name, cur)
	l.Deadline = driver.DeadlineFrom(start, ttl)
	return l, nil
}

func (t *toy) Renew(ctx context.Context, l lease.Lease, ttl time.Duration) (lease.Lease, error) {
	if err := t.ready(ctx); err != nil {
		return lease.Lease{}, err
	}
	if err := driver.CheckRenew(l, ttl); err != nil {
		return lease.Lease{}, err
	}
	start := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, ok := t.held(l.Name, start)
	if !ok || cur.owner != l.Owner || cur.token != l.Token {
		return lease.Lease{}, fmt.Errorf("toy: %q: %w", l.Name, lease.ErrLost)
	}
	if t.mode != "renew-no-op" {
		cur.expires = start.Add(ttl)
		t.leases[l.Name] = cur
	}
	out := t.view(l.Name, cur)
	out.Expires = start.Add(ttl) // what the holder is told, broken or not
	out.Deadline = driver.DeadlineFrom(start, ttl)
	return out, nil
}

func (t *toy) Release(ctx context.Context, l lease.Lease) error {
	if err := t.ready(ctx); err != nil {
		return err
	}
	if err := driver.CheckLease(l); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, ok := t.held(l.Name, time.Now())
	if !ok || cur.owner != l.Owner || cur.token != l.Token {
		return fmt.Errorf("toy: %q: %w", l.Name, lease.ErrLost)
	}
	switch t.mode {
	case "release-ignored":
		return nil
	case "token-restarts":
		delete(t.tokens, l.Name)
	}
	delete(t.leases, l.Name)
	return nil
}

func (t *toy) Inspect(ctx context.Context, name string) (lease.Lease, error) {
	if err := t.ready(ctx); err != nil {
		return lease.Lease{}, err
	}
	if err := driver.CheckName(name); err != nil {
		return lease.Lease{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, ok := t.held(name, time.Now())
	if !ok {
		return lease.Lease{}, fmt.Errorf("toy: %q: %w", name, lease.ErrNotHeld)
	}
	return t.view(name, cur), nil
}

func (t *toy) Close() error {
	t.closed.Store(true)
	return nil
}

func (t *toy) ready(ctx context.Context) error {
	if t.closed.Load() {
		return lease.ErrClosed
	}
	return ctx.Err()
}
