package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/leasekit/lease/internal/line"
)

// RunOption configures Run.
type RunOption func(*runConfig)

type runConfig struct {
	owner      string
	renewEvery time.Duration // 0: ttl/3; <0: never
	wait       time.Duration
	minHold    time.Duration
	fair       bool
	logger     *slog.Logger
	hashNames  bool
	err        error // the first invalid option
}

// invalid records the first invalid option, which Run reports.
func (c *runConfig) invalid(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
}

// WithOwner makes Run acquire as owner instead of a fresh NewOwner(). Two
// Runs with one owner share one tenure (re-entrancy), so use it only to
// resume a known identity, such as a job's claim token.
func WithOwner(owner string) RunOption { return func(c *runConfig) { c.owner = owner } }

// WithRenewEvery makes Run renew the lease every d instead of every ttl/3.
// d must be positive and shorter than the ttl (use WithoutRenewal to turn
// renewal off); Run reports anything else as an error matching ErrInvalid.
func WithRenewEvery(d time.Duration) RunOption {
	return func(c *runConfig) {
		if d <= 0 {
			c.invalid("WithRenewEvery(%s): the interval must be positive (WithoutRenewal turns renewal off)", d)
			return
		}
		c.renewEvery = d
	}
}

// WithoutRenewal makes Run hold the lease for one ttl only: fn's context is
// cancelled when the Deadline passes.
func WithoutRenewal() RunOption { return func(c *runConfig) { c.renewEvery = -1 } }

// WithWait makes Run wait up to d for a busy lease instead of returning
// the *HeldError at once. Where the store can notify (memory, Redis, etcd,
// and PostgreSQL with a Listener), the waiting Lockers form one line per
// name in the store: a release wakes only the Locker whose place is
// first, and within one Locker only its first waiter asks the store, so
// a release sets off one Acquire, not one per waiter. A waiter also tries
// at least every quarter of the ttl (between 50ms and 2s), and its place
// lasts three of those after its last attempt, so a waiter that died
// holds up the others for at most that long. Elsewhere (SQLite, MySQL)
// Run polls with jittered backoff, never later than the holder's
// remaining time. Waiting never holds anyone back: any Acquire of a free
// name succeeds. A negative d is an error matching ErrInvalid.
func WithWait(d time.Duration) RunOption {
	return func(c *runConfig) {
		if d < 0 {
			c.invalid("WithWait(%s): negative wait", d)
		}
		c.wait = d
	}
}

// WithFairWait is WithWait with arrival order, over the same line: Run
// takes a free name only when its Locker's place is first in the name's
// line (or the line is empty), so the lease goes to the waiting Lockers
// in the order they came, and within one Locker to its waiters in the
// order they came (a Locker whose waiter got the lease goes to the back
// of the line if others of its waiters still wait). A waiter that gives
// up passes its turn on; one that died holds the line up for at most
// three quarters of the ttl (at most 6s). It needs a store that keeps a
// line (memory, Redis, etcd, PostgreSQL with a Listener); with any other
// Locker, Run fails at once with an error matching errors.ErrUnsupported
// that names the option and the store. A caller that does not wait fairly
// can still take a free name first.
func WithFairWait(d time.Duration) RunOption {
	return func(c *runConfig) {
		WithWait(d)(c)
		c.fair = true
	}
}

// WithMinHold makes Run keep the lease until d after it was acquired, even
// if fn returns earlier, so that hosts whose timers fire a little apart do
// not each run the same scheduled job. A negative d is an error matching
// ErrInvalid.
func WithMinHold(d time.Duration) RunOption {
	return func(c *runConfig) {
		if d < 0 {
			c.invalid("WithMinHold(%s): negative hold", d)
		}
		c.minHold = d
	}
}

type leaseKey struct{}

// holding is the lease a Run holds, updated on every renewal.
type holding struct {
	mu sync.Mutex
	l  Lease
}

func (h *holding) get() Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.l
}

func (h *holding) set(l Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.l = l
}

// FromContext returns the lease held by the Run whose fn got ctx, as of
// its latest renewal, so that fn can pass its Token to the systems it
// writes to (or the Lease given to NewContext).
func FromContext(ctx context.Context) (Lease, bool) {
	switch v := ctx.Value(leaseKey{}).(type) {
	case *holding:
		return v.get(), true
	case Lease:
		return v, true
	}
	return Lease{}, false
}

// NewContext returns a copy of ctx that carries l, for code that holds a
// lease without Run (Acquire and Renew by hand) and calls helpers that read
// FromContext, such as the fence package's HTTP Transport. Keep it up to
// date: a renewal returns a new Lease.
func NewContext(ctx context.Context, l Lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// Run runs fn while holding the lease name on l, the way most programs use
// a lease:
//
//   - It acquires name for ttl as a fresh NewOwner() (see WithOwner). When
//     another owner holds it, Run returns the *HeldError (errors.Is ErrHeld)
//     without calling fn, unless WithWait says to wait.
//   - fn is never entered at or after the lease's Deadline: each Acquire is
//     bounded by the Deadline it would grant, and a tenure whose grant
//     arrives too late to act on is released unused and reported as an
//     error matching context.DeadlineExceeded (the store was too slow).
//   - While fn runs, it renews the lease about every ttl/3 (see
//     WithRenewEvery and WithoutRenewal). The ctx given to fn carries the lease (FromContext)
//     and is cancelled, with a context.Cause matching ErrLost, as soon as a
//     renewal reports the lease lost or the lease's Deadline passes without
//     a successful renewal. fn must stop acting as the holder then.
//   - Once fn's context ends (ctx cancelled, the lease lost, the Deadline
//     passed), renewals stop: fn has until the Deadline to wind down, and
//     a fn that ignores its context past the Deadline no longer holds the
//     lease (another holder may then run).
//   - When fn returns, or panics, Run releases the lease, owner-fenced (and
//     re-panics). WithMinHold keeps it a while longer first.
//
// Run returns fn's error, joined with an error matching ErrLost when the
// lease was lost while fn ran or found lost at release, and with the
// release's error when the store failed then. A store error while
// acquiring is returned as it is: it does not match ErrHeld.
//
// The Runs that share a Locker share one renewer, kept in the Locker
// itself (every Locker of this module, and otellease's wrapper, keep it;
// on any other Locker each Run renews on its own), which coalesces the
// renewals that fall due together into one call when the Locker has
// RenewBatch (see driver.Locker.RenewBatch; every Locker of this module
// has it), spreads them over ±10% of
// the interval so that Runs started together do not renew in waves, and
// renews the most urgent first. Its goroutine lives while any Run on the
// Locker does; Run returns only after its renewals have stopped, and
// renewals are called with a context that ends at a Deadline, so Run's
// return waits on a Locker only if it ignores contexts.
func Run(ctx context.Context, l Locker, name string, ttl time.Duration, fn func(ctx context.Context) error, opts ...RunOption) (err error) {
	cfg := runConfig{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.owner == "" {
		cfg.owner = NewOwner()
	}
	switch {
	case cfg.err != nil:
		return cfg.err
	case l == nil:
		return fmt.Errorf("%w: Run with a nil Locker", ErrInvalid)
	case fn == nil:
		return fmt.Errorf("%w: Run with a nil fn", ErrInvalid)
	case cfg.renewEvery > 0 && cfg.renewEvery >= ttl:
		return fmt.Errorf("%w: renewal every %s would come after the ttl of %s ran out", ErrInvalid, cfg.renewEvery, ttl)
	}
	if cfg.renewEvery == 0 {
		cfg.renewEvery = ttl / 3
	}

	log := newRunLog(cfg.logger, name, cfg.owner, ttl, cfg.hashNames)
	begun := time.Now()
	held, err := acquireWaiting(ctx, l, name, cfg.owner, ttl, cfg.wait, cfg.fair, log)
	if err != nil {
		var he *HeldError
		if errors.As(err, &he) {
			log.log(slog.LevelInfo, "lease busy", slog.String("lease.holder", he.Owner), slog.Duration("lease.remaining", he.Remaining))
		} else {
			log.log(slog.LevelWarn, "lease not acquired", slog.Any("error", err))
		}
		return err
	}
	acquiredAt := time.Now()
	log.held(held)
	log.log(slog.LevelInfo, "lease acquired", slog.Duration("lease.waited", acquiredAt.Sub(begun)))

	h := &holding{l: held}
	fnCtx, cancel := context.WithCancelCause(context.WithValue(ctx, leaseKey{}, h))
	defer cancel(nil)

	// The watchdog cancels fn's context when the Deadline passes without a
	// renewal, even if a renewal call hangs in the store.
	var wdMu sync.Mutex
	watchdog := time.AfterFunc(time.Until(held.Deadline), func() {
		err := fmt.Errorf("lease %q: deadline passed without a successful renewal: %w", name, ErrLost)
		log.log(slog.LevelError, "lease lost", slog.Any("error", err))
		cancel(err)
	})
	defer watchdog.Stop()

	stopRenewing := func() {}
	if cfg.renewEvery > 0 {
		stopRenewing = startRenewing(l, &renewJob{
			ctx:   fnCtx,
			h:     h,
			ttl:   ttl,
			every: cfg.renewEvery,
			log:   log,
			lost:  func(err error) { cancel(err) },
			renewed: func(got Lease) {
				wdMu.Lock()
				defer wdMu.Unlock()
				if fnCtx.Err() == nil {
					watchdog.Reset(time.Until(got.Deadline))
				}
			},
		})
	}
	stop := sync.OnceFunc(func() {
		stopRenewing()
		wdMu.Lock()
		watchdog.Stop()
		wdMu.Unlock()
	})

	// The grant may have taken so long that nothing is left of the tenure:
	// never enter fn then (the last check before the call).
	if late := time.Since(h.get().Deadline); late >= 0 {
		stop()
		rctx, rcancel := releaseContext(ctx, ttl)
		defer rcancel()
		_ = l.Release(rctx, h.get())
		log.log(slog.LevelWarn, "lease granted too late, released unused", slog.Duration("lease.late", late))
		return fmt.Errorf("lease %q: the store granted it %s after its Deadline had passed, too late to act on; it was released unused: %w", name, late.Round(time.Millisecond), context.DeadlineExceeded)
	}
	finished := false
	defer func() {
		if finished {
			return
		}
		// fn panicked or called runtime.Goexit: release and let it go on.
		stop()
		rctx, rcancel := releaseContext(ctx, ttl)
		defer rcancel()
		_ = l.Release(rctx, h.get())
	}()
	fnErr := fn(fnCtx)
	finished = true

	if cfg.minHold > 0 && fnCtx.Err() == nil {
		if wait := time.Until(acquiredAt.Add(cfg.minHold)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-fnCtx.Done():
				t.Stop()
			}
		}
	}
	stop()

	errs := []error{fnErr}
	lost := context.Cause(fnCtx)
	if lost != nil && errors.Is(lost, ErrLost) {
		errs = append(errs, lost)
	}
	rctx, rcancel := releaseContext(ctx, ttl)
	defer rcancel()
	rerr := l.Release(rctx, h.get())
	switch {
	case rerr == nil:
		log.log(slog.LevelInfo, "lease released", slog.Duration("lease.held", time.Since(acquiredAt)))
	case errors.Is(rerr, ErrLost):
		log.log(slog.LevelError, "lease found lost at release", slog.Any("error", rerr))
	default:
		log.log(slog.LevelWarn, "lease release failed; it expires on its own", slog.Any("error", rerr))
	}
	if rerr != nil {
		switch {
		case errors.Is(rerr, ErrLost) && lost != nil && errors.Is(lost, ErrLost):
			// Already reported.
		case errors.Is(rerr, ErrLost):
			errs = append(errs, fmt.Errorf("lease %q was lost before release; exclusivity may have been broken: %w", name, rerr))
		default:
			errs = append(errs, fmt.Errorf("lease %q: release failed (it expires on its own): %w", name, rerr))
		}
	}
	return errors.Join(errs...)
}

// releaseContext is for the final Release: it outlives a cancelled parent,
// which is often why fn returned, but not by more than the ttl.
func releaseContext(ctx context.Context, ttl time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), min(ttl, 10*time.Second))
}

// retryEvery is how long a waiter waits at most between attempts while
// the store does not wake it: what a lost wake-up can cost. It scales
// with the ttl (a quarter of it, from 50ms to 2s), so that short leases,
// as in tests, do not wait seconds. A waiter's mark in the store's line
// lasts three of these (see WithWait).
func retryEvery(ttl time.Duration) time.Duration {
	return min(max(ttl/4, 50*time.Millisecond), 2*time.Second)
}

// acquireWaiting acquires name, waiting up to wait while another owner
// holds it. Every attempt is an Acquire of l whose context carries the
// waiter's place (internal/line): a Locker that keeps a line of waiters
// (every backend of this module whose store can notify) wakes it when a
// release chose it, and at least every retryEvery; with other Lockers it
// polls with jittered backoff, never sleeping far past the holder's
// expiry. Each attempt may take at most the Deadline it would grant.
func acquireWaiting(ctx context.Context, l Locker, name, owner string, ttl, wait time.Duration, fair bool, log *runLog) (got Lease, err error) {
	limit := time.Now().Add(wait)
	var w *line.Wait
	if wait > 0 || fair {
		w = line.New(fair, retryEvery(ttl))
		defer func() { w.Done(err == nil) }()
	}
	backoff := 10 * time.Millisecond
	var (
		he      *HeldError
		lastErr error // the last attempt's, a *HeldError
		logged  bool
	)
	for {
		// An answer after the Deadline it would grant is of no use: stop
		// waiting for it then (the store is slow or stalled).
		actx, acancel := context.WithDeadline(ctx, time.Now().Add(ttl-DriftMargin(ttl)))
		if w != nil {
			actx = line.NewContext(actx, w)
		}
		held, err := l.Acquire(actx, name, owner, ttl)
		acancel()
		if fair && !w.Taken() && (err == nil || errors.As(err, &he)) {
			// A Locker that does not keep a line ignored the fair wait.
			if err == nil {
				rctx, rcancel := releaseContext(ctx, ttl)
				_ = l.Release(rctx, held)
				rcancel()
			}
			return Lease{}, fmt.Errorf("lease %q: WithFairWait needs a Locker that keeps a line of waiters, and %T does not: %w", name, l, errors.ErrUnsupported)
		}
		if err == nil || wait <= 0 {
			return held, err
		}
		if !errors.As(err, &he) {
			return Lease{}, err
		}
		lastErr = err
		left := time.Until(limit)
		if left <= 0 {
			return Lease{}, lastErr
		}
		woken := w.Taken()
		if !logged {
			logged = true
			log.log(slog.LevelInfo, "waiting for lease", slog.String("lease.holder", he.Owner), slog.Duration("lease.remaining", he.Remaining),
				slog.Duration("lease.wait", wait), slog.Bool("lease.watching", woken))
		}
		var d time.Duration
		var changed <-chan struct{}
		if woken {
			changed = w.Changed()
			d = min(he.Remaining+time.Millisecond, w.Retry, left)
		} else {
			// Full jitter, but never sleep far past the holder's expiry or
			// the caller's limit.
			d = min(time.Duration(rand.Int64N(int64(max(backoff, time.Millisecond))))+time.Millisecond, he.Remaining+time.Millisecond, left)
			backoff = min(max(backoff*2, 10*time.Millisecond), time.Second)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return Lease{}, fmt.Errorf("lease %q: gave up waiting: %w; last attempt: %w", name, context.Cause(ctx), lastErr)
		case <-changed:
			t.Stop()
		case <-t.C:
		}
	}
}
