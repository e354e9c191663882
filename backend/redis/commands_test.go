package redislease_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
)

// countHook records the commands a client sends and the round trips they
// take (a pipeline is one round trip).
type countHook struct {
	mu       sync.Mutex
	trips    int
	commands []string
}

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.trips++
		h.commands = append(h.commands, cmd.Name())
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		h.trips++
		for _, c := range cmds {
			h.commands = append(h.commands, c.Name())
		}
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (h *countHook) take() (int, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	trips, cmds := h.trips, h.commands
	h.trips, h.commands = 0, nil
	return trips, cmds
}

// op is one Locker call to measure.
type op struct {
	name  string
	setup func(ctx context.Context, l *redislease.Locker) error // not measured
	fn    func(ctx context.Context, l *redislease.Locker) error
}

// run runs o's setup, then calls measure around o's call.
func (o op) run(ctx context.Context, l *redislease.Locker, measure func(call func() error) error) error {
	if o.setup != nil {
		if err := o.setup(ctx, l); err != nil {
			return fmt.Errorf("setup: %w", err)
		}
	}
	return measure(func() error { return o.fn(ctx, l) })
}

// ops returns every operation, in an order where each finds the state it
// is named after.
func ops(name string) []op {
	var held lease.Lease
	return []op{
		{"Acquire (free name)", nil, func(ctx context.Context, l *redislease.Locker) (err error) {
			held, err = l.Acquire(ctx, name, "owner-a", time.Minute)
			return err
		}},
		{"Acquire (re-entrant)", nil, func(ctx context.Context, l *redislease.Locker) (err error) {
			held, err = l.Acquire(ctx, name, "owner-a", time.Minute)
			return err
		}},
		{"Acquire (held: ErrHeld)", nil, func(ctx context.Context, l *redislease.Locker) error {
			_, err := l.Acquire(ctx, name, "owner-b", time.Minute)
			if !errors.Is(err, lease.ErrHeld) {
				return fmt.Errorf("want ErrHeld, got %v", err)
			}
			return nil
		}},
		{"Renew", nil, func(ctx context.Context, l *redislease.Locker) (err error) {
			held, err = l.Renew(ctx, held, time.Minute)
			return err
		}},
		{"Inspect (held)", nil, func(ctx context.Context, l *redislease.Locker) error {
			_, err := l.Inspect(ctx, name)
			return err
		}},
		{"Release", nil, func(ctx context.Context, l *redislease.Locker) error {
			return l.Release(ctx, held)
		}},
		{"Release (lost: ErrLost)", nil, func(ctx context.Context, l *redislease.Locker) error {
			if err := l.Release(ctx, held); !errors.Is(err, lease.ErrLost) {
				return fmt.Errorf("want ErrLost, got %v", err)
			}
			return nil
		}},
		{"Inspect (free: ErrNotHeld)", nil, func(ctx context.Context, l *redislease.Locker) error {
			if _, err := l.Inspect(ctx, name); !errors.Is(err, lease.ErrNotHeld) {
				return fmt.Errorf("want ErrNotHeld, got %v", err)
			}
			return nil
		}},
		{"ForceRelease", func(ctx context.Context, l *redislease.Locker) error {
			_, err := l.Acquire(ctx, name, "owner-c", time.Minute)
			return err
		}, func(ctx context.Context, l *redislease.Locker) error {
			_, err := l.ForceRelease(ctx, name)
			return err
		}},
	}
}

// checkOneTripEach runs ops on a Locker whose client has hook h and fails
// unless each takes exactly one round trip of one EVALSHA.
func checkOneTripEach(t *testing.T, l *redislease.Locker, h *countHook, name string) {
	t.Helper()
	ctx := context.Background()
	// Warm the script cache: EVALSHA, NOSCRIPT, EVAL happens once per
	// script per server.
	for _, o := range ops(name + "/warm") {
		if err := o.run(ctx, l, func(call func() error) error { return call() }); err != nil {
			t.Fatalf("%s: %v", o.name, err)
		}
	}
	for _, o := range ops(name) {
		var (
			trips int
			cmds  []string
		)
		err := o.run(ctx, l, func(call func() error) error {
			h.take()
			err := call()
			trips, cmds = h.take()
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", o.name, err)
		}
		if trips != 1 || len(cmds) != 1 {
			t.Errorf("%s took %d round trips with commands %v; want 1", o.name, trips, cmds)
		}
		for _, c := range cmds {
			if c != "evalsha" {
				t.Errorf("%s sent %q; want only evalsha", o.name, c)
			}
		}
		t.Logf("%-28s %d round trip(s): %s", o.name, trips, strings.Join(cmds, " "))
	}
}

// TestOneRoundTripPerOperationMiniredis counts the commands the client
// sends for each operation.
func TestOneRoundTripPerOperationMiniredis(t *testing.T) {
	t.Parallel()
	_, client, _ := newMiniredis(t)
	h := &countHook{}
	client.AddHook(h)
	checkOneTripEach(t, mustNew(t, client), h, "jobs/trips")
}

// TestFirstUseLoadsScriptOnce shows the cost of a cold script cache: the
// first run of a script is EVALSHA, NOSCRIPT, then EVAL; later runs are
// one EVALSHA.
func TestFirstUseLoadsScriptOnce(t *testing.T) {
	t.Parallel()
	_, client, _ := newMiniredis(t)
	h := &countHook{}
	client.AddHook(h)
	l := mustNew(t, client)
	ctx := context.Background()
	if err := client.Ping(ctx).Err(); err != nil { // set up the connection
		t.Fatal(err)
	}
	h.take()
	if _, err := l.Inspect(ctx, "cold"); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Inspect: %v", err)
	}
	if trips, cmds := h.take(); trips != 2 || strings.Join(cmds, " ") != "evalsha eval" {
		t.Fatalf("first Inspect took %d round trips: %v; want evalsha eval", trips, cmds)
	}
	if _, err := l.Inspect(ctx, "cold"); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Inspect: %v", err)
	}
	if trips, cmds := h.take(); trips != 1 || strings.Join(cmds, " ") != "evalsha" {
		t.Fatalf("second Inspect took %d round trips: %v; want evalsha", trips, cmds)
	}
}

// TestCommandsPerOperationRedis measures each operation on the real
// server twice: the round trips the client makes (exactly one EVALSHA
// each), and the commands the server executed for this client, read from
// MONITOR (the EVALSHA and the commands its script ran), which stays exact
// while other tests use the server. Not parallel all the same: MONITOR
// makes the shared server copy every command to it, which would slow the
// other tests of this package.
func TestCommandsPerOperationRedis(t *testing.T) {
	client, raw := realRedis(t, -1)
	prefix := randomPrefix("trips")
	deleteKeys(t, client, prefix)

	h := &countHook{}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	measured := redis.NewClient(opts)
	defer measured.Close()
	measured.AddHook(h)
	l := mustNew(t, measured, redislease.WithPrefix(prefix))
	checkOneTripEach(t, l, h, "jobs/trips")

	mon := startMonitor(t, opts)
	ctx := context.Background()
	for _, o := range ops("jobs/stats") {
		var cmds []string
		err := o.run(ctx, l, func(call func() error) (err error) {
			cmds, err = mon.measure(t, measured, call)
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", o.name, err)
		}
		sent := 0
		for i, c := range cmds {
			if i == 0 && c != "evalsha" {
				t.Errorf("%s: the server ran %v; want an EVALSHA first", o.name, cmds)
			}
			if c == "evalsha" || c == "eval" {
				sent++
			}
		}
		if sent != 1 {
			t.Errorf("%s: the server ran %d scripts for it: %v; want 1", o.name, sent, cmds)
		}
		// A release announces itself to the Watches from inside its script:
		// still one EVALSHA, one more command on the server.
		if published := slices.Contains(cmds, "publish"); published != (o.name == "Release" || o.name == "ForceRelease") {
			t.Errorf("%s: the server ran %v; a PUBLISH belongs to the releases that end a tenure, and only to them", o.name, cmds)
		}
		t.Logf("%-28s server ran %2d commands: %s", o.name, len(cmds), strings.Join(cmds, " "))
	}
}

// TestOpenPreloadsScripts checks that Open puts the scripts in the server's
// cache, so that even a fresh client's first operation is one EVALSHA, and
// that loading them leaves the scripts' SHAs intact for every Locker.
func TestOpenPreloadsScripts(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	ctx := context.Background()
	opened, err := redislease.Open(ctx, "redis://"+mr.Addr())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer opened.Close()

	h := &countHook{}
	client := newClient(t, mr.Addr())
	client.AddHook(h)
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	h.take()
	l := mustNew(t, client)
	held, err := l.Acquire(ctx, "jobs/x", "owner", time.Minute)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if _, err := l.Inspect(ctx, "jobs/x"); err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if err := l.Release(ctx, held); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if trips, cmds := h.take(); trips != 3 || strings.Join(cmds, " ") != "evalsha evalsha evalsha" {
		t.Fatalf("Acquire, Inspect and Release after Open took %d round trips: %v; want 3 EVALSHAs", trips, cmds)
	}
	if _, err := opened.Acquire(ctx, "jobs/y", "owner", time.Minute); err != nil {
		t.Fatalf("Acquire on the opened Locker: %v", err)
	}
}
