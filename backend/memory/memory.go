package memory

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

func init() {
	lease.Register("mem", func(ctx context.Context, u *url.URL) (lease.Locker, error) {
		if _, err := driver.URLQuery(u); err != nil {
			return nil, err
		}
		if u.Host != "" || (u.Path != "" && u.Path != "/") || u.Opaque != "" {
			return nil, fmt.Errorf("%w: mem URL takes no host or path (want mem://)", lease.ErrInvalid)
		}
		return New(), nil
	})
}

// Option configures a Locker.
type Option func(*store)

// WithClock makes the store judge expiry by c instead of the system clock
// (a nil c keeps the system clock).
func WithClock(c Clock) Option {
	return func(s *store) {
		if c != nil {
			s.clock = c
		}
	}
}

// Locker is an in-memory lease store. Its tokens increase for the store's
// lifetime, across every name. It implements lease.Locker, lease.Lister
// and lease.ForceReleaser, and is safe for concurrent use.
type Locker struct {
	*base
	s *store
}

// base is the shared lease.Locker machinery every backend is built on.
type base = driver.Locker

// store is the state that Lockers returned by Share have in common. It
// implements driver.Store, driver.Lister and driver.ForceReleaser.
type store struct {
	clock Clock

	mu       sync.Mutex
	leases   map[string]tenure
	token    uint64
	watchers map[string]map[*watch]struct{}
	marks    map[string][]mark // the line of waiters of each name, in placement order (turns.go)
}

// mark is a waiter's place in a name's line.
type mark struct {
	waiter  string
	expires time.Time
}

type tenure struct {
	owner    string
	token    uint64
	expires  time.Time
	acquired time.Time
}

var (
	_ lease.Locker         = (*Locker)(nil)
	_ lease.Lister         = (*Locker)(nil)
	_ lease.ForceReleaser  = (*Locker)(nil)
	_ driver.Lister        = (*store)(nil)
	_ driver.ForceReleaser = (*store)(nil)
	_ driver.Watcher       = (*store)(nil)
	_ driver.TurnWatcher   = (*store)(nil)
)

// New returns an empty store. It has no client and no option that can
// fail, so unlike the other backends' New it returns no error.
func New(opts ...Option) *Locker {
	s := &store{clock: systemClock{}, leases: map[string]tenure{}, watchers: map[string]map[*watch]struct{}{}, marks: map[string][]mark{}}
	for _, o := range opts {
		o(s)
	}
	return newLocker(s)
}

func newLocker(s *store) *Locker {
	return &Locker{base: driver.NewLocker("memory", handle{s}), s: s}
}

// Share returns another Locker on the same store, as a second process
// connecting to one database would get. Closing one does not close the
// other.
func (l *Locker) Share() *Locker { return newLocker(l.s) }

// handle is one Locker's view of a store: closing it leaves the store to
// the other handles.
type handle struct{ *store }

func (handle) Close() error { return nil }

// current returns name's unexpired tenure. s.mu must be held.
func (s *store) current(name string, now time.Time) (tenure, bool) {
	t, ok := s.leases[name]
	if !ok {
		return tenure{}, false
	}
	if !now.Before(t.expires) {
		delete(s.leases, name)
		return tenure{}, false
	}
	return t, true
}

// Acquire implements driver.Store.
func (s *store) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (driver.Tenure, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acquire(name, owner, ttl, s.clock.Now()), nil
}

// acquire is Acquire at now. s.mu must be held.
func (s *store) acquire(name, owner string, ttl time.Duration, now time.Time) driver.Tenure {
	t, held := s.current(name, now)
	switch {
	case held && t.owner != owner:
		return t.view(name, now)
	case !held:
		s.token++
		t = tenure{owner: owner, token: s.token, acquired: now}
	}
	t.expires = now.Add(ttl)
	s.leases[name] = t
	return t.view(name, now)
}

// Renew implements driver.Store.
func (s *store) Renew(ctx context.Context, want driver.Tenure, ttl time.Duration) (driver.Tenure, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	t, held := s.current(want.Name, now)
	if !held || t.owner != want.Owner || t.token != want.Token {
		return driver.Tenure{}, false, nil
	}
	t.expires = now.Add(ttl)
	s.leases[want.Name] = t
	return t.view(want.Name, now), true, nil
}

// Release implements driver.Store.
func (s *store) Release(ctx context.Context, want driver.Tenure) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, held := s.current(want.Name, s.clock.Now())
	if !held || t.owner != want.Owner || t.token != want.Token {
		return false, nil
	}
	delete(s.leases, want.Name)
	s.notify(want.Name)
	return true, nil
}

// Inspect implements driver.Store.
func (s *store) Inspect(ctx context.Context, name string) (driver.Tenure, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	t, held := s.current(name, now)
	return t.view(name, now), held, nil
}

// List implements driver.Lister.
func (s *store) List(ctx context.Context, prefix string) ([]driver.Tenure, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	var out []driver.Tenure
	for name := range s.leases {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		if t, held := s.current(name, now); held {
			out = append(out, t.view(name, now))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ForceRelease implements driver.ForceReleaser.
func (s *store) ForceRelease(ctx context.Context, name string) (driver.Tenure, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	t, held := s.current(name, now)
	if !held {
		return driver.Tenure{}, false, nil
	}
	delete(s.leases, name)
	s.notify(name)
	return t.view(name, now), true, nil
}

// view is t as the store reports it at now.
func (t tenure) view(name string, now time.Time) driver.Tenure {
	return driver.Tenure{Name: name, Owner: t.owner, Token: t.token, Expires: t.expires, Acquired: t.acquired, Remaining: t.expires.Sub(now)}
}

// watch is one Watch on a name of a memory store.
type watch struct {
	s      *store
	name   string
	waiter string // a turn Watch's waiter, "" for a plain Watch
	driver.Signal
	stopCtx func() bool
	once    sync.Once
}

// Watch implements driver.Watcher: the Watch's channel receives when a
// tenure of name is released or force-released. Expiry is noticed only
// when a call reads the name, so waiters also wake at the holder's
// remaining time, as lease.Run's waiting does.
func (s *store) Watch(ctx context.Context, name string) (driver.Watch, error) {
	return s.watch(ctx, name, ""), nil
}

// watch registers a Watch of waiter ("" for a plain one) on name.
func (s *store) watch(ctx context.Context, name, waiter string) *watch {
	w := &watch{s: s, name: name, waiter: waiter, Signal: driver.NewSignal()}
	s.mu.Lock()
	if s.watchers[name] == nil {
		s.watchers[name] = map[*watch]struct{}{}
	}
	s.watchers[name][w] = struct{}{}
	s.mu.Unlock()
	w.stopCtx = context.AfterFunc(ctx, w.unregister)
	return w
}

func (w *watch) Stop() {
	w.stopCtx()
	w.unregister()
}

func (w *watch) unregister() {
	w.once.Do(func() {
		w.s.mu.Lock()
		defer w.s.mu.Unlock()
		delete(w.s.watchers[w.name], w)
		if len(w.s.watchers[w.name]) == 0 {
			delete(w.s.watchers, w.name)
		}
	})
}

// notify wakes name's plain Watches, and its turn Watches of the waiter
// whose live mark was placed first, or all of them when no mark is live.
// s.mu must be held.
func (s *store) notify(name string) {
	chosen := ""
	if m := s.liveMarks(name, s.clock.Now()); len(m) > 0 {
		chosen = m[0].waiter
	}
	for w := range s.watchers[name] {
		if w.waiter == "" || chosen == "" || w.waiter == chosen {
			w.Wake()
		}
	}
}
