package memory

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
)

func init() {
	lease.Register("mem", func(ctx context.Context, u *url.URL) (lease.Locker, error) {
		if _, err := lease.URLQuery(u); err != nil {
			return nil, err
		}
		if u.Host != "" || (u.Path != "" && u.Path != "/") || u.Opaque != "" {
			return nil, fmt.Errorf("%w: mem URL takes no host or path (want mem://)", lease.ErrInvalid)
		}
		return New(), nil
	})
}

// Option configures a Locker.
type Option func(*Locker)

// WithClock makes the store judge expiry by c instead of the system clock.
func WithClock(c Clock) Option {
	return func(l *Locker) { l.clock = c }
}

// Locker is an in-memory lease store. Its tokens increase for the store's
// lifetime, across every name. It implements lease.Locker, lease.Lister
// and lease.ForceReleaser, and is safe for concurrent use.
type Locker struct {
	*store
	closed atomic.Bool
}

// store is the state that Lockers returned by Share have in common.
type store struct {
	clock Clock

	mu     sync.Mutex
	leases map[string]tenure
	token  uint64
}

type tenure struct {
	owner   string
	token   uint64
	expires time.Time
}

var (
	_ lease.Locker        = (*Locker)(nil)
	_ lease.Lister        = (*Locker)(nil)
	_ lease.ForceReleaser = (*Locker)(nil)
)

// New returns an empty store.
func New(opts ...Option) *Locker {
	l := &Locker{store: &store{clock: systemClock{}, leases: map[string]tenure{}}}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Share returns another Locker on the same store, as a second process
// connecting to one database would get. Closing one does not close the
// other.
func (l *Locker) Share() *Locker {
	return &Locker{store: l.store}
}

// current returns name's unexpired tenure. l.mu must be held.
func (l *store) current(name string, now time.Time) (tenure, bool) {
	t, ok := l.leases[name]
	if !ok {
		return tenure{}, false
	}
	if !now.Before(t.expires) {
		delete(l.leases, name)
		return tenure{}, false
	}
	return t, true
}

func (l *Locker) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("lease/memory: %w", err)
	}
	if l.closed.Load() {
		return lease.ErrClosed
	}
	return nil
}

// Acquire implements lease.Locker.
func (l *Locker) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	if err := lease.CheckAcquire(name, owner, ttl); err != nil {
		return lease.Lease{}, err
	}
	start := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.begin(ctx); err != nil {
		return lease.Lease{}, err
	}
	now := l.clock.Now()
	t, held := l.current(name, now)
	switch {
	case held && t.owner != owner:
		return lease.Lease{}, &lease.HeldError{Name: name, Owner: t.owner, Remaining: t.expires.Sub(now)}
	case !held:
		l.token++
		t = tenure{owner: owner, token: l.token}
	}
	t.expires = now.Add(ttl)
	l.leases[name] = t
	return l.lease(name, t, start, ttl), nil
}

// Renew implements lease.Locker.
func (l *Locker) Renew(ctx context.Context, ls lease.Lease, ttl time.Duration) (lease.Lease, error) {
	if err := lease.CheckRenew(ls, ttl); err != nil {
		return lease.Lease{}, err
	}
	start := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.begin(ctx); err != nil {
		return lease.Lease{}, err
	}
	now := l.clock.Now()
	t, held := l.current(ls.Name, now)
	if !held || t.owner != ls.Owner || t.token != ls.Token {
		return lease.Lease{}, fmt.Errorf("lease/memory: renew %q token %d: %w", ls.Name, ls.Token, lease.ErrLost)
	}
	t.expires = now.Add(ttl)
	l.leases[ls.Name] = t
	return l.lease(ls.Name, t, start, ttl), nil
}

// Release implements lease.Locker.
func (l *Locker) Release(ctx context.Context, ls lease.Lease) error {
	if err := lease.CheckLease(ls); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.begin(ctx); err != nil {
		return err
	}
	t, held := l.current(ls.Name, l.clock.Now())
	if !held || t.owner != ls.Owner || t.token != ls.Token {
		return fmt.Errorf("lease/memory: release %q token %d: %w", ls.Name, ls.Token, lease.ErrLost)
	}
	delete(l.leases, ls.Name)
	return nil
}

// Inspect implements lease.Locker.
func (l *Locker) Inspect(ctx context.Context, name string) (lease.Lease, error) {
	if err := lease.CheckName(name); err != nil {
		return lease.Lease{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.begin(ctx); err != nil {
		return lease.Lease{}, err
	}
	t, held := l.current(name, l.clock.Now())
	if !held {
		return lease.Lease{}, fmt.Errorf("lease/memory: inspect %q: %w", name, lease.ErrNotHeld)
	}
	return t.view(name), nil
}

// List implements lease.Lister.
func (l *Locker) List(ctx context.Context, prefix string) ([]lease.Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.begin(ctx); err != nil {
		return nil, err
	}
	now := l.clock.Now()
	var out []lease.Lease
	for name := range l.leases {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		if t, held := l.current(name, now); held {
			out = append(out, t.view(name))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ForceRelease implements lease.ForceReleaser.
func (l *Locker) ForceRelease(ctx context.Context, name string) (lease.Lease, error) {
	if err := lease.CheckName(name); err != nil {
		return lease.Lease{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.begin(ctx); err != nil {
		return lease.Lease{}, err
	}
	t, held := l.current(name, l.clock.Now())
	if !held {
		return lease.Lease{}, fmt.Errorf("lease/memory: force release %q: %w", name, lease.ErrNotHeld)
	}
	delete(l.leases, name)
	return t.view(name), nil
}

// Close marks the store closed; later calls fail with lease.ErrClosed.
// It is safe to call more than once.
func (l *Locker) Close() error {
	l.closed.Store(true)
	return nil
}

// lease is the holder's view of t: with a Deadline for a call that
// started at start.
func (l *Locker) lease(name string, t tenure, start time.Time, ttl time.Duration) lease.Lease {
	out := t.view(name)
	out.Deadline = lease.DeadlineFrom(start, ttl)
	return out
}

// view is an observer's view of t, as Inspect and List return it.
func (t tenure) view(name string) lease.Lease {
	return lease.Lease{Name: name, Owner: t.owner, Token: t.token, Expires: t.expires}
}
