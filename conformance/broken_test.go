package conformance_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/conformance"
)

// brokenEnv selects the broken backend that TestBrokenBackend runs the
// suite against, in a child process of TestSuiteCatchesBrokenBackends.
const brokenEnv = "CONFORMANCE_BROKEN_MODE"

// Each broken backend breaks one promise; the suite must fail it, and the
// named subtest must be among the failures.
var brokenModes = map[string]string{
	"two-holders":                  "another_owner_gets_ErrHeld",
	"token-restarts-after-release": "release_then_re-acquire_by_the_same_owner_gets_a_larger_token",
	"reentrant-new-token":          "holder's_re-acquire_keeps_the_token",
	"renew-ignores-token":          "stale_owner_cannot_renew_or_release_after_its_own_re-acquire",
	"renew-ignores-owner":          "stale_owner_cannot_renew_after_takeover",
	"renew-revives-expired":        "stale_owner_cannot_renew_after_plain_expiry",
	"release-ignores-owner":        "stale_owner_cannot_release_after_takeover",
	"release-swallows-lost":        "stale_owner_cannot_release_after_plain_expiry",
	"never-expires":                "takeover_after_expiry_gives_a_larger_token",
	"inspect-ignores-expiry":       "inspect_reports_an_expired_tenure_as_not_held",
	"inspect-invents-holder":       "inspect_reports_a_free_name_as_not_held",
	"deadline-after-response":      "acquire_on_a_free_name_starts_a_tenure",
	"deadline-without-margin":      "acquire_on_a_free_name_starts_a_tenure",
	"deadline-from-store-clock":    "acquire_on_a_free_name_starts_a_tenure",
	"canceled-as-held":             "canceled_context_is_reported_as_such",
	"case-insensitive-names":       "names_with_awkward_characters_never_collide",
	"truncated-names":              "long_names_sharing_a_1000-byte_prefix_do_not_collide",
	"no-validation":                "bad_input_is_refused_with_ErrInvalid",
	"usable-after-close":           "a_closed_locker_refuses_every_call_with_ErrClosed",
	"racy-acquire":                 "concurrent_acquires_on_a_free_name:_exactly_one_wins",
}

func TestSuiteCatchesBrokenBackends(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("running as a child")
	}
	if testing.Short() {
		t.Skip("starts a process per broken backend")
	}
	for mode, want := range brokenModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenBackend$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+mode)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a backend broken by %q:\n%s", mode, tail(out))
			}
			if !strings.Contains(string(out), "--- FAIL: TestBrokenBackend/"+want) {
				t.Fatalf("the suite failed the %q backend, but not in subtest %q:\n%s", mode, want, failures(out))
			}
		})
	}
}

func TestBrokenBackend(t *testing.T) {
	mode := os.Getenv(brokenEnv)
	if mode == "" {
		t.Skip("only run as a child of TestSuiteCatchesBrokenBackends")
	}
	store := &toyStore{mode: mode, leases: map[string]*toyTenure{}, tokens: map[string]uint64{}}
	conformance.Run(t, conformance.Harness{
		New:     func(testing.TB) lease.Locker { return &toy{toyStore: store} },
		TTL:     100 * time.Millisecond,
		Tenures: 200,
	})
}

func failures(out []byte) string {
	var b strings.Builder
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "--- FAIL") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func tail(out []byte) string {
	if len(out) > 3000 {
		out = out[len(out)-3000:]
	}
	return string(out)
}

// toyStore is a small Locker that keeps the contract except where mode
// breaks it.
type toyStore struct {
	mode   string
	mu     sync.Mutex
	leases map[string]*toyTenure
	tokens map[string]uint64
}

type toyTenure struct {
	name, owner string
	token       uint64
	expires     time.Time
}

type toy struct {
	*toyStore
	closed bool
}

func (s *toyStore) is(mode string) bool { return s.mode == mode }

func (s *toyStore) key(name string) string {
	switch {
	case s.is("case-insensitive-names"):
		return strings.ToLower(name)
	case s.is("truncated-names") && len(name) > 1000:
		return name[:1000]
	}
	return name
}

func (s *toyStore) live(name string) *toyTenure {
	t := s.leases[s.key(name)]
	if t == nil || (!s.is("never-expires") && !time.Now().Before(t.expires)) {
		return nil
	}
	return t
}

func (l *toy) check(ctx context.Context) error {
	if l.closed && !l.is("usable-after-close") {
		return lease.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		if l.is("canceled-as-held") {
			return &lease.HeldError{Name: "?", Owner: "?", Remaining: time.Second}
		}
		return err
	}
	return nil
}

func (l *toy) deadline(start time.Time, ttl time.Duration, expires time.Time) time.Time {
	switch {
	case l.is("deadline-after-response"):
		return time.Now().Add(ttl - lease.DriftMargin(ttl)/4)
	case l.is("deadline-without-margin"):
		return start.Add(ttl)
	case l.is("deadline-from-store-clock"):
		return expires.Round(0).Add(-lease.DriftMargin(ttl))
	}
	return lease.DeadlineFrom(start, ttl)
}

func (l *toy) out(t *toyTenure, start time.Time, ttl time.Duration) lease.Lease {
	return lease.Lease{Name: t.name, Owner: t.owner, Token: t.token, Expires: t.expires, Deadline: l.deadline(start, ttl, t.expires)}
}

func (l *toy) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	if !l.is("no-validation") {
		if err := lease.CheckAcquire(name, owner, ttl); err != nil {
			return lease.Lease{}, err
		}
	}
	start := time.Now()
	if l.is("racy-acquire") {
		l.mu.Lock()
		free := l.live(name) == nil
		l.mu.Unlock()
		time.Sleep(time.Millisecond)
		if free {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.tokens[l.key(name)]++
			t := &toyTenure{name: name, owner: owner, token: l.tokens[l.key(name)], expires: time.Now().Add(ttl)}
			l.leases[l.key(name)] = t
			return l.out(t, start, ttl), nil
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(ctx); err != nil {
		return lease.Lease{}, err
	}
	t := l.live(name)
	switch {
	case t != nil && t.owner != owner && !l.is("two-holders"):
		return lease.Lease{}, &lease.HeldError{Name: name, Owner: t.owner, Remaining: time.Until(t.expires)}
	case t == nil || t.owner != owner || l.is("reentrant-new-token"):
		l.tokens[l.key(name)]++
		t = &toyTenure{name: name, owner: owner, token: l.tokens[l.key(name)]}
		l.leases[l.key(name)] = t
	}
	t.expires = time.Now().Add(ttl)
	return l.out(t, start, ttl), nil
}

func (l *toy) intact(held lease.Lease) *toyTenure {
	t := l.live(held.Name)
	if l.is("renew-revives-expired") {
		t = l.leases[l.key(held.Name)]
	}
	if t == nil {
		return nil
	}
	if t.owner == held.Owner && t.token == held.Token ||
		l.is("renew-ignores-token") && t.owner == held.Owner ||
		l.is("renew-ignores-owner") {
		return t
	}
	return nil
}

func (l *toy) Renew(ctx context.Context, held lease.Lease, ttl time.Duration) (lease.Lease, error) {
	if err := lease.CheckRenew(held, ttl); err != nil && !l.is("no-validation") {
		return lease.Lease{}, err
	}
	start := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(ctx); err != nil {
		return lease.Lease{}, err
	}
	t := l.intact(held)
	if t == nil {
		return lease.Lease{}, lease.ErrLost
	}
	if exp := time.Now().Add(ttl); !l.is("renew-never-shortens") || exp.After(t.expires) {
		t.expires = exp
	}
	return l.out(t, start, ttl), nil
}

func (l *toy) Release(ctx context.Context, held lease.Lease) error {
	if err := lease.CheckLease(held); err != nil && !l.is("no-validation") {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(ctx); err != nil {
		return err
	}
	t := l.live(held.Name)
	intact := t != nil && t.owner == held.Owner && t.token == held.Token
	if l.is("renew-ignores-token") {
		intact = l.intact(held) != nil
	}
	if l.is("release-ignores-owner") && t != nil {
		intact = true
	}
	if !intact {
		if l.is("release-swallows-lost") {
			return nil
		}
		return lease.ErrLost
	}
	delete(l.leases, l.key(held.Name))
	if l.is("token-restarts-after-release") {
		delete(l.tokens, l.key(held.Name))
	}
	return nil
}

func (l *toy) Inspect(ctx context.Context, name string) (lease.Lease, error) {
	if err := lease.CheckName(name); err != nil && !l.is("no-validation") {
		return lease.Lease{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(ctx); err != nil {
		return lease.Lease{}, err
	}
	t := l.live(name)
	if l.is("inspect-ignores-expiry") {
		t = l.leases[l.key(name)]
	}
	if t == nil {
		if l.is("inspect-invents-holder") {
			return lease.Lease{Name: name, Owner: "ghost", Token: 1, Expires: time.Now().Add(time.Minute)}, nil
		}
		return lease.Lease{}, fmt.Errorf("toy: %w", lease.ErrNotHeld)
	}
	return lease.Lease{Name: name, Owner: t.owner, Token: t.token, Expires: t.expires}, nil
}

func (l *toy) Close() error {
	l.closed = true
	return nil
}

// TestToyBackendPasses shows the toy backend passes when nothing is
// broken, so each failure above is the broken promise's doing.
func TestToyBackendPasses(t *testing.T) {
	store := &toyStore{mode: "", leases: map[string]*toyTenure{}, tokens: map[string]uint64{}}
	conformance.Run(t, conformance.Harness{
		New:     func(testing.TB) lease.Locker { return &toy{toyStore: store} },
		TTL:     100 * time.Millisecond,
		Tenures: 200,
	})
}
