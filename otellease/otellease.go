package otellease

import (
	"fmt"
	"path"
	"reflect"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasekit/lease"
)

// ScopeName is the instrumentation scope of the wrapper's meter and
// tracer.
const ScopeName = "github.com/leasekit/lease/otellease"

// Option configures Wrap. An option given a bad value makes Wrap return an
// error matching lease.ErrInvalid.
type Option func(*config) error

type config struct {
	mp        metric.MeterProvider
	tp        trace.TracerProvider
	backend   string
	hashNames bool
}

// WithMeterProvider makes the wrapper record its metrics through mp
// instead of the global meter provider (otel.GetMeterProvider()). A nil
// mp is an error: leave the option out to use the global provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return fmt.Errorf("%w: WithMeterProvider(nil) (leave the option out to use the global provider)", lease.ErrInvalid)
		}
		c.mp = mp
		return nil
	}
}

// WithTracerProvider makes the wrapper record its spans through tp instead
// of the global tracer provider (otel.GetTracerProvider()). A nil tp is an
// error: leave the option out to use the global provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return fmt.Errorf("%w: WithTracerProvider(nil) (leave the option out to use the global provider)", lease.ErrInvalid)
		}
		c.tp = tp
		return nil
	}
}

// WithBackend sets the lease.backend attribute of every metric and span,
// for example "postgres" for a lease/backend/sql Locker on PostgreSQL.
// Without it the backend is the name of the package that defines the
// wrapped Locker's type: memory, sql, redis or etcd for this module's
// backends. An empty name is an error.
func WithBackend(name string) Option {
	return func(c *config) error {
		if name == "" {
			return fmt.Errorf("%w: WithBackend(\"\"): empty backend name", lease.ErrInvalid)
		}
		c.backend = name
		return nil
	}
}

// WithHashedNames makes spans carry the first 16 hex digits of the SHA-256
// of each lease name, as lease.name_sha256 (and of List's prefix, as
// lease.prefix_sha256), instead of the name, and leaves out the error text
// that would quote it, for names that are long or sensitive. It hashes as
// lease.WithHashedNames does for Run's logs, so the two can be joined.
// Metrics never carry names.
func WithHashedNames() Option {
	return func(c *config) error {
		c.hashNames = true
		return nil
	}
}

// Wrap returns a Locker that calls l and records each call as metrics and
// a span (see the package documentation). It implements lease.Lister,
// lease.ForceReleaser and driver.Watcher and has RenewBatch, whatever l
// is; each passes the call on to l's, or fails with an error matching
// errors.ErrUnsupported when l has not got it, and lease.Can on it
// answers as on l. lease.Run's waiting (WithWait, WithFairWait) works over it as
// over l, since it goes through Acquire, which the wrapper records and
// passes on. It has an Unwrap method that returns l:
//
//	inner := wrapped.(interface{ Unwrap() lease.Locker }).Unwrap()
//
// Wrap returns an error matching lease.ErrInvalid for a nil l or a bad
// option, and the meter provider's error if it cannot make an instrument.
// It sends nothing to the store.
//
// Close the returned Locker, not l: its Close closes l and stops the
// lease.held observation that Wrap registered with the meter provider.
func Wrap(l lease.Locker, opts ...Option) (lease.Locker, error) {
	if l == nil {
		return nil, fmt.Errorf("otellease: Wrap: %w: nil Locker", lease.ErrInvalid)
	}
	var cfg config
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("otellease: Wrap: %w: nil Option", lease.ErrInvalid)
		}
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("otellease: Wrap: %w", err)
		}
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	if cfg.backend == "" {
		cfg.backend = backendOf(l)
	}
	c, err := newCore(l, cfg)
	if err != nil {
		return nil, fmt.Errorf("otellease: Wrap: %w", err)
	}
	return wrapper{c}, nil
}

// backendOf names l's backend by its Backend method (every backend built
// on package driver has one), else after the package that defines its
// type, looking through other wrappers.
func backendOf(l lease.Locker) string {
	for {
		u, ok := l.(interface{ Unwrap() lease.Locker })
		if !ok {
			break
		}
		inner := u.Unwrap()
		if inner == nil {
			break
		}
		l = inner
	}
	if b, ok := l.(interface{ Backend() string }); ok && b.Backend() != "" {
		return b.Backend()
	}
	t := reflect.TypeOf(l)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if p := t.PkgPath(); p != "" {
		return path.Base(p)
	}
	return "unknown"
}

// core is the wrapper: it implements lease.Locker, and the optional
// interfaces through the small types in wrappers.go, which pick the ones
// the wrapped Locker has.
type core struct {
	l         lease.Locker
	tracer    trace.Tracer
	inst      instruments
	hashNames bool

	// observed is set once a collection has called the lease.held
	// callback: the meter provider records even if its synchronous
	// instruments are disabled.
	observed   atomic.Bool
	registered metric.Registration
	unregister sync.Once

	tenures tenures

	// shared is what lease.Run shares among the Runs on this wrapper
	// (their renewer, which renews through the wrapper).
	shared sync.Map
}

// Shared returns the value stored under key, storing make() first when
// there is none: lease.Run keeps in it what the Runs on this wrapper
// share (their renewer), so that their renewals are batched, and traced,
// through the wrapper.
func (c *core) Shared(key any, make func() any) any {
	if v, ok := c.shared.Load(key); ok {
		return v
	}
	v, _ := c.shared.LoadOrStore(key, make())
	return v
}

// Unwrap returns the Locker that Wrap was given.
func (c *core) Unwrap() lease.Locker { return c.l }

// Close implements lease.Locker: it closes the wrapped Locker, returning
// its error unchanged, and stops observing lease.held for this wrapper.
func (c *core) Close() error {
	err := c.l.Close()
	c.unregister.Do(func() {
		if c.registered != nil {
			// The SDK's Unregister fails only for a registration it did
			// not make; nothing to report to the caller of Close.
			_ = c.registered.Unregister()
		}
	})
	return err
}
