package driver

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/line"
)

// Locker is a lease.Locker built around a Store. It does what every
// backend must do the same way, once:
//
//   - it checks every argument against the contract (CheckAcquire,
//     CheckRenew, CheckLease, CheckName) before the Store sees it;
//   - it refuses every call after Close with lease.ErrClosed, and a call
//     whose context has already ended with the context's error;
//   - it reads the monotonic clock before each request and stamps the
//     Deadline from it (DeadlineFrom);
//   - it turns the Store's outcomes into lease.HeldError, lease.ErrLost
//     and lease.ErrNotHeld, and never lets a Store's error match them;
//   - it prefixes every error the same way, "lease/<backend>: <op>
//     <name>: ...", and makes an error that came from an ended context
//     match that context's error.
//
// Backends embed a *Locker in their own Locker type and add what is theirs
// (constructors, options, store-specific methods). Locker also implements
// lease.Lister, lease.ForceReleaser and Watcher, and has RenewBatch (which
// lease.Run renews through); lease.Can (through the Locker's Can) says
// which of the interfaces work, as the
// Store can (see Capable), and the ones that do not return an error
// matching errors.ErrUnsupported.
type Locker struct {
	prefix string
	store  Store
	closed atomic.Bool
	// doubts are the tenures whose Release failed without an answer;
	// Acquire does not re-enter them (see doubts).
	doubts doubts
	// lines is this Locker's line of waiters per name (line.go).
	lines lines
	// shared is what lease.Run shares among the Runs on this Locker.
	shared sync.Map
}

var (
	_ lease.Locker        = (*Locker)(nil)
	_ lease.Lister        = (*Locker)(nil)
	_ lease.ForceReleaser = (*Locker)(nil)
	_ Watcher             = (*Locker)(nil)
)

// NewLocker returns a Locker that keeps its tenures in s. backend names
// the backend in every error ("sql" gives "lease/sql: ..."). The Locker
// owns s: its Close calls s.Close.
func NewLocker(backend string, s Store) *Locker {
	if s == nil {
		panic("lease/driver: NewLocker with a nil Store")
	}
	return &Locker{prefix: "lease/" + backend, store: s}
}

// Acquire implements lease.Locker.
func (l *Locker) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	const op = "acquire"
	if err := CheckAcquire(name, owner, ttl); err != nil {
		return lease.Lease{}, l.invalid(op, err)
	}
	if err := l.begin(ctx); err != nil {
		return lease.Lease{}, l.fail(ctx, op, name, err)
	}
	if w := line.FromContext(ctx); w != nil {
		return l.acquireInLine(ctx, w, name, owner, ttl)
	}
	return l.acquire(ctx, op, name, owner, ttl, false, func() (Tenure, error) {
		return l.store.Acquire(ctx, name, owner, ttl)
	})
}

// acquire runs an acquisition (a Store's Acquire or AcquireOrWait) and
// turns its tenure into the holder's Lease or a HeldError. With fair, a
// tenure without an owner is a fair AcquireOrWait's answer that the name
// is free but another waiter is first in line: a HeldError whose Owner is
// empty. When it
// re-entered a tenure of owner whose Release is in doubt (see doubts), it
// ends that tenure with a Release whose answer it waits for, and
// acquires again, so that the caller gets a new tenure, with a new token,
// that the late Release cannot end.
func (l *Locker) acquire(ctx context.Context, op, name, owner string, ttl time.Duration, fair bool, acquire func() (Tenure, error)) (lease.Lease, error) {
	for range maxSettles {
		start := time.Now()
		t, err := acquire()
		if err != nil {
			return lease.Lease{}, l.fail(ctx, op, name, err)
		}
		if t.Owner != owner {
			if t.Owner == "" && fair && t.Remaining > 0 {
				return lease.Lease{}, &lease.HeldError{Name: name, Remaining: t.Remaining}
			}
			if t.Owner == "" {
				return lease.Lease{}, l.fail(ctx, op, name, errors.New("the store reported a holder without an owner"))
			}
			return lease.Lease{}, &lease.HeldError{Name: name, Owner: t.Owner, Remaining: max(t.Remaining, time.Millisecond)}
		}
		k := doubtKey{name: name, owner: owner, token: t.Token}
		if !l.doubts.has(k) {
			return l.held(ctx, op, name, owner, t, start, ttl)
		}
		t.Name, t.Owner = name, owner
		if _, err := l.store.Release(ctx, t); err != nil {
			return lease.Lease{}, l.fail(ctx, op, name, fmt.Errorf("end token %d, whose earlier Release failed without an answer, before acquiring anew: %w", t.Token, err))
		}
		l.doubts.clear(k)
	}
	return lease.Lease{}, l.fail(ctx, op, name, fmt.Errorf("owner %q re-entered tenures whose Release failed without an answer %d times in a row", owner, maxSettles))
}

// maxSettles bounds the tenures in doubt one Acquire ends before it gives
// up (see acquire).
const maxSettles = 3

// Renew implements lease.Locker.
func (l *Locker) Renew(ctx context.Context, ls lease.Lease, ttl time.Duration) (lease.Lease, error) {
	const op = "renew"
	if err := CheckRenew(ls, ttl); err != nil {
		return lease.Lease{}, l.invalid(op, err)
	}
	if err := l.begin(ctx); err != nil {
		return lease.Lease{}, l.fail(ctx, op, ls.Name, err)
	}
	start := time.Now()
	t, ok, err := l.store.Renew(ctx, tenureOf(ls), ttl)
	if err != nil {
		return lease.Lease{}, l.fail(ctx, op, ls.Name, err)
	}
	if !ok {
		return lease.Lease{}, l.lost(op, ls)
	}
	t.Owner, t.Token = ls.Owner, ls.Token
	if t.Acquired.IsZero() {
		t.Acquired = ls.Acquired
	}
	return l.held(ctx, op, ls.Name, ls.Owner, t, start, ttl)
}

// Release implements lease.Locker.
func (l *Locker) Release(ctx context.Context, ls lease.Lease) error {
	const op = "release"
	if err := CheckLease(ls); err != nil {
		return l.invalid(op, err)
	}
	if err := l.begin(ctx); err != nil {
		return l.fail(ctx, op, ls.Name, err)
	}
	ok, err := l.store.Release(ctx, tenureOf(ls))
	if err != nil {
		l.doubts.add(ls)
		return l.fail(ctx, op, ls.Name, err)
	}
	l.doubts.clear(keyOfLease(ls))
	if !ok {
		return l.lost(op, ls)
	}
	return nil
}

// Inspect implements lease.Locker.
func (l *Locker) Inspect(ctx context.Context, name string) (lease.Lease, error) {
	const op = "inspect"
	if err := CheckName(name); err != nil {
		return lease.Lease{}, l.invalid(op, err)
	}
	if err := l.begin(ctx); err != nil {
		return lease.Lease{}, l.fail(ctx, op, name, err)
	}
	t, ok, err := l.store.Inspect(ctx, name)
	if err != nil {
		return lease.Lease{}, l.fail(ctx, op, name, err)
	}
	if !ok {
		return lease.Lease{}, fmt.Errorf("%s: %s %s: %w", l.prefix, op, Quote(name), lease.ErrNotHeld)
	}
	return l.view(ctx, op, name, t)
}

// List implements lease.Lister: the unexpired tenures whose names start
// with prefix, sorted by name. It returns an error matching
// errors.ErrUnsupported when the Store is not a Lister.
func (l *Locker) List(ctx context.Context, prefix string) ([]lease.Lease, error) {
	const op = "list"
	s, ok := l.store.(Lister)
	if !ok || !storeCan[Lister](l.store) {
		return nil, fmt.Errorf("%s: %s: %w", l.prefix, op, errors.ErrUnsupported)
	}
	if err := l.begin(ctx); err != nil {
		return nil, l.fail(ctx, op, prefix, err)
	}
	ts, err := s.List(ctx, prefix)
	if err != nil {
		return nil, l.fail(ctx, op, prefix, err)
	}
	out := make([]lease.Lease, 0, len(ts))
	for _, t := range ts {
		ls, err := l.view(ctx, op, t.Name, t)
		if err != nil {
			return nil, err
		}
		out = append(out, ls)
	}
	return out, nil
}

// ForceRelease implements lease.ForceReleaser: it ends the current tenure
// of name whoever holds it and returns it, or an error matching
// lease.ErrNotHeld. It returns an error matching errors.ErrUnsupported when
// the Store is not a ForceReleaser.
func (l *Locker) ForceRelease(ctx context.Context, name string) (lease.Lease, error) {
	const op = "force release"
	s, ok := l.store.(ForceReleaser)
	if !ok || !storeCan[ForceReleaser](l.store) {
		return lease.Lease{}, fmt.Errorf("%s: %s: %w", l.prefix, op, errors.ErrUnsupported)
	}
	if err := CheckName(name); err != nil {
		return lease.Lease{}, l.invalid(op, err)
	}
	if err := l.begin(ctx); err != nil {
		return lease.Lease{}, l.fail(ctx, op, name, err)
	}
	t, ok, err := s.ForceRelease(ctx, name)
	if err != nil {
		return lease.Lease{}, l.fail(ctx, op, name, err)
	}
	if !ok {
		return lease.Lease{}, fmt.Errorf("%s: %s %s: %w", l.prefix, op, Quote(name), lease.ErrNotHeld)
	}
	return l.view(ctx, op, name, t)
}

// Watch implements Watcher through the Store's Watcher, and returns
// an error matching errors.ErrUnsupported when the Store is not one.
func (l *Locker) Watch(ctx context.Context, name string) (Watch, error) {
	s, ok := l.store.(Watcher)
	return l.watch(ctx, "watch", name, ok && storeCan[Watcher](l.store), func() (Watch, error) { return s.Watch(ctx, name) })
}

// watch makes a Watch or turn Watch of name with start, with the checks
// and errors of op; supported says whether the Store can.
func (l *Locker) watch(ctx context.Context, op, name string, supported bool, start func() (Watch, error)) (Watch, error) {
	if !supported {
		return nil, fmt.Errorf("%s: %s: %w", l.prefix, op, errors.ErrUnsupported)
	}
	if err := CheckName(name); err != nil {
		return nil, l.invalid(op, err)
	}
	if err := l.begin(ctx); err != nil {
		return nil, l.fail(ctx, op, name, err)
	}
	w, err := start()
	if err != nil {
		return nil, l.fail(ctx, op, name, err)
	}
	return w, nil
}

// Close implements lease.Locker: it makes every later call fail with
// lease.ErrClosed and closes the Store. Calling it again returns nil.
func (l *Locker) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	l.lines.closeAll()
	if err := l.store.Close(); err != nil {
		return fmt.Errorf("%s: close: %w", l.prefix, err)
	}
	return nil
}

// Shared returns the value stored under key, storing make() first when
// there is none. lease.Run keeps in it what the Runs on this Locker share
// (their renewer, which batches their renewals), so that nothing is kept
// in a process-wide map keyed by Locker.
func (l *Locker) Shared(key any, make func() any) any {
	if v, ok := l.shared.Load(key); ok {
		return v
	}
	v, _ := l.shared.LoadOrStore(key, make())
	return v
}

// Backend returns the backend's name, as given to NewLocker ("redis",
// "sql"), for tools that label what they observe.
func (l *Locker) Backend() string { return strings.TrimPrefix(l.prefix, "lease/") }

// Closed reports whether Close has been called.
func (l *Locker) Closed() bool { return l.closed.Load() }

// begin refuses a call on a closed Locker or with an ended context.
func (l *Locker) begin(ctx context.Context) error {
	if l.closed.Load() {
		return lease.ErrClosed
	}
	return ctx.Err()
}

// held is the holder's Lease for t, granted or renewed by a request sent
// after start.
func (l *Locker) held(ctx context.Context, op, name, owner string, t Tenure, start time.Time, ttl time.Duration) (lease.Lease, error) {
	if t.Token == 0 {
		return lease.Lease{}, l.fail(ctx, op, name, errors.New("the store returned token 0, which no tenure has"))
	}
	return lease.Lease{
		Name:     name,
		Owner:    owner,
		Token:    t.Token,
		Expires:  t.Expires,
		Acquired: t.Acquired,
		Deadline: DeadlineFrom(start, ttl),
	}, nil
}

// view is an observer's Lease for t: no Deadline.
func (l *Locker) view(ctx context.Context, op, name string, t Tenure) (lease.Lease, error) {
	if t.Token == 0 || t.Owner == "" {
		return lease.Lease{}, l.fail(ctx, op, name, fmt.Errorf("the store returned a tenure without owner or token (owner %q, token %d)", t.Owner, t.Token))
	}
	return lease.Lease{Name: name, Owner: t.Owner, Token: t.Token, Expires: t.Expires, Acquired: t.Acquired}, nil
}

// lost is the ErrLost of op on ls.
func (l *Locker) lost(op string, ls lease.Lease) error {
	return fmt.Errorf("%s: %s %s token %d: %w", l.prefix, op, Quote(ls.Name), ls.Token, lease.ErrLost)
}

// invalid prefixes an argument error; it names no lease, since the name
// may be what is wrong.
func (l *Locker) invalid(op string, err error) error {
	return fmt.Errorf("%s: %s: %w", l.prefix, op, err)
}

// fail shapes an error from the store or the call's context: prefixed,
// matching ErrClosed when Close raced the call, and matching the
// context's error when the context ended while the store worked, so that
// a timeout reads as a timeout whatever the driver said. A Store's error
// never matches a lease sentinel other than ErrClosed.
func (l *Locker) fail(ctx context.Context, op, name string, err error) error {
	if leaksSentinel(err) {
		err = fmt.Errorf("%v (the store's error text; it is not a lease outcome)", err)
	}
	switch cerr := ctxErr(ctx); {
	case errors.Is(err, lease.ErrClosed):
	case l.closed.Load():
		err = fmt.Errorf("%w: %w", lease.ErrClosed, err)
	case cerr != nil && !errors.Is(err, cerr):
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	if name == "" {
		return fmt.Errorf("%s: %s: %w", l.prefix, op, err)
	}
	return fmt.Errorf("%s: %s %s: %w", l.prefix, op, Quote(name), err)
}

// leaksSentinel reports whether a Store's error matches an outcome
// sentinel, which only the Locker may produce.
func leaksSentinel(err error) bool {
	return errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrNotHeld)
}

func tenureOf(ls lease.Lease) Tenure {
	return Tenure{Name: ls.Name, Owner: ls.Owner, Token: ls.Token, Expires: ls.Expires, Acquired: ls.Acquired}
}

// Quote formats a lease name for an error message: quoted, and cut to its
// first 64 bytes when longer (names may be 1024 bytes).
func Quote(name string) string {
	const limit = 64
	if len(name) <= limit {
		return fmt.Sprintf("%q", name)
	}
	cut := limit
	for cut > 0 && !utf8RuneStart(name[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", name[:cut], len(name))
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

func errBatchLength(got, want int) error {
	return fmt.Errorf("the store answered a batch of %d renewals with %d outcomes", want, got)
}

// ctxErr is ctx's error, or context.DeadlineExceeded once ctx's deadline
// has passed even if its timer has not fired yet: a driver that set its
// connection's deadline from ctx's times out at that same instant.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// Can answers lease.Can: whether the Locker can do what the optional
// interface that p points to promises, as its Store can. For
// *lease.Lister, *lease.ForceReleaser and *Watcher that is the Store's
// answer (see Capable); for any other interface that the Locker has
// (RenewBatch's, say, which works on every Store: one renewal at a time
// without a BatchRenewer Store) it is yes, and for one it has not, no.
func (l *Locker) Can(p any) bool {
	switch p.(type) {
	case *lease.Lister:
		return storeCan[Lister](l.store)
	case *lease.ForceReleaser:
		return storeCan[ForceReleaser](l.store)
	case *Watcher:
		return storeCan[Watcher](l.store)
	}
	t := reflect.TypeOf(p)
	return t != nil && t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Interface && reflect.TypeOf(l).Implements(t.Elem())
}

// storeCan reports whether s implements I and, if it is Capable, says it
// can.
func storeCan[I any](s Store) bool {
	if _, ok := s.(I); !ok {
		return false
	}
	if c, ok := s.(Capable); ok {
		return c.Can((*I)(nil))
	}
	return true
}
