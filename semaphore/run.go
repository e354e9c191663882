package semaphore

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// Option configures Run. An invalid option makes Run return an error
// matching lease.ErrInvalid that names it.
type Option func(*config)

type config struct {
	wait   time.Duration
	owner  string
	logger *slog.Logger
	lease  []lease.RunOption // passed on to lease.Run for the slot
	err    error             // the first invalid option
}

func (c *config) invalid(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: semaphore: "+format, append([]any{lease.ErrInvalid}, args...)...)
	}
}

// WithWait makes Run wait up to d for a slot when every slot is held,
// instead of returning the *FullError at once: woken by a release of any
// slot where the Locker is a driver.Watcher whose store can watch, polling
// otherwise (see the package documentation for the cost). A negative d
// is an error matching lease.ErrInvalid.
func WithWait(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.invalid("WithWait(%s): negative wait", d)
		}
		c.wait = d
	}
}

// WithOwner makes Run hold its slot as owner instead of a fresh
// lease.NewOwner(). Two Runs with one owner may share one slot's tenure
// (re-entrancy), so use it only to resume a known identity.
func WithOwner(owner string) Option {
	return func(c *config) {
		if err := driver.CheckOwner(owner); err != nil {
			c.invalid("WithOwner: %v", err)
			return
		}
		c.owner = owner
	}
}

// WithLogger makes Run log what happens to the slot's lease through
// logger, as lease.Run's WithLogger does (the lease's name is the slot's
// name). A nil logger logs nothing, as does leaving the option out.
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) { c.logger = logger }
}

// WithRenewEvery makes Run renew the slot's lease every d instead of
// every ttl/3, as lease.Run's WithRenewEvery does. d must be positive and
// shorter than the ttl; Run reports anything else as an error matching
// lease.ErrInvalid.
func WithRenewEvery(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.invalid("WithRenewEvery(%s): the interval must be positive", d)
			return
		}
		c.lease = append(c.lease, lease.WithRenewEvery(d))
	}
}

// WithMinHold makes Run keep its slot until d after it was acquired, even
// if fn returns earlier, as lease.Run's WithMinHold does. A negative d is
// an error matching lease.ErrInvalid.
func WithMinHold(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.invalid("WithMinHold(%s): negative hold", d)
			return
		}
		c.lease = append(c.lease, lease.WithMinHold(d))
	}
}

// Run runs fn while holding one of the n slots of the semaphore name on
// l, with lease.Run's guarantees for that slot's lease:
//
//   - It takes a free slot below n as Acquire does. When every slot is
//     held it returns a *FullError (errors.Is lease.ErrHeld) without
//     calling fn, unless WithWait says to wait; a waiter wakes on the
//     release of any slot (see the package documentation).
//   - fn gets the Slot: its index and its lease, whose Token is the
//     slot's fencing token. Its context carries the lease
//     (lease.FromContext, as of the latest renewal) and is cancelled, with
//     a cause matching lease.ErrLost, as soon as a renewal reports the
//     slot lost or the slot's Deadline passes without a renewal. fn must
//     stop acting as a holder then.
//   - While fn runs, the slot's lease is renewed about every ttl/3.
//   - When fn returns, or panics, the slot is released, owner-fenced.
//
// Run returns what lease.Run returns for the slot: fn's error, joined
// with an error matching lease.ErrLost when the slot was lost while fn
// ran or found lost at release, and with the release's error when the
// store failed then. A store error while looking for a slot is returned
// as it is: it does not match lease.ErrHeld.
//
// A bad name, capacity, ttl, fn or option is an error matching
// lease.ErrInvalid that names the problem; nothing reaches the store.
// Run starts no goroutine that outlives it.
func Run(ctx context.Context, l lease.Locker, name string, n int, ttl time.Duration, fn func(ctx context.Context, s Slot) error, opts ...Option) error {
	var cfg config
	for i, o := range opts {
		if o == nil {
			cfg.invalid("option %d is nil", i)
			continue
		}
		o(&cfg)
	}
	switch {
	case cfg.err != nil:
		return cfg.err
	case l == nil:
		return fmt.Errorf("%w: semaphore %q: Run with a nil Locker", lease.ErrInvalid, name)
	case fn == nil:
		return fmt.Errorf("%w: semaphore %q: Run with a nil fn", lease.ErrInvalid, name)
	}
	if err := check(name, n, ttl); err != nil {
		return err
	}
	owner := cfg.owner
	if owner == "" {
		owner = lease.NewOwner()
	}
	runOpts := append([]lease.RunOption{lease.WithOwner(owner), lease.WithLogger(cfg.logger)}, cfg.lease...)
	var (
		entered bool  // fn was called: the try is over, whatever it returned
		result  error // lease.Run's, once fn was called
	)
	err := acquireWaiting(ctx, l, name, n, cfg.wait, func(ctx context.Context, slot string, index int) error {
		// lease.Run acquires the slot (one round trip), or returns the
		// *lease.HeldError without calling fn, and holds it while fn runs.
		err := lease.Run(ctx, l, slot, ttl, func(ctx context.Context) error {
			entered = true
			held, _ := lease.FromContext(ctx)
			return fn(ctx, Slot{Name: name, Index: index, N: n, Lease: held})
		}, runOpts...)
		if entered {
			result = err
			return nil
		}
		return err
	})
	if entered {
		return result
	}
	return err
}
