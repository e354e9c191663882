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

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
)

// gateHook, once armed, holds the next n lone commands (not pipelines)
// until open is called, so that a test can keep a Locker's lanes busy.
type gateHook struct {
	mu      sync.Mutex
	n       int
	held    int
	gate    chan struct{}
	blocked chan struct{} // one send per command held
}

func newGateHook() *gateHook {
	return &gateHook{gate: make(chan struct{}), blocked: make(chan struct{}, 1)}
}

// arm makes h hold the next n lone commands.
func (h *gateHook) arm(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n, h.held = n, 0
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		hold := h.held < h.n
		if hold {
			h.held++
		}
		h.mu.Unlock()
		if hold {
			h.blocked <- struct{}{}
			<-h.gate
		}
		return next(ctx, cmd)
	}
}

func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *gateHook) open() { close(h.gate) }

// busyLanes starts Lanes Inspect-free Acquires of names of their own on
// l, one after the other (calls that arrive together may share a
// pipeline), holds them on the wire with h until the caller opens h, and
// returns a function that waits for them and checks they succeeded.
func busyLanes(t *testing.T, l *redislease.Locker, h *gateHook) (wait func()) {
	t.Helper()
	lanes := redislease.Lanes(l)
	h.arm(lanes)
	var wg sync.WaitGroup
	errs := make(chan error, lanes)
	for i := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Acquire(context.Background(), fmt.Sprintf("lane/%d", i), "lanes", time.Minute)
			errs <- err
		}()
		select {
		case <-h.blocked:
		case <-time.After(10 * time.Second):
			t.Fatal("the lanes' requests never reached the client")
		}
	}
	return func() {
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("a lane's Acquire: %v", err)
			}
		}
	}
}

// waitQueued waits until n calls of l wait for a pipeline.
func waitQueued(t *testing.T, l *redislease.Locker, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for redislease.Waiting(l) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls wait for a pipeline; want %d", redislease.Waiting(l), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// pipelineClients runs fn on miniredis and, when LEASE_TEST_REDIS is set,
// on the real server, each client with a gate holding Lanes commands
// and a scriptTrips after it.
func pipelineClients(t *testing.T, fn func(t *testing.T, client *redis.Client, gate *gateHook, count *scriptTrips, opts ...redislease.Option)) {
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		_, client, _ := newMiniredis(t)
		gate, count := newGateHook(), &scriptTrips{}
		client.AddHook(gate)
		client.AddHook(count)
		fn(t, client, gate, count)
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		client, _ := realRedis(t, -1)
		prefix := randomPrefix("pipeline")
		deleteKeys(t, client, prefix)
		gate, count := newGateHook(), &scriptTrips{}
		client.AddHook(gate)
		client.AddHook(count)
		fn(t, client, gate, count, redislease.WithPrefix(prefix))
	})
}

// TestConcurrentCallsShareRoundTrips: while a Locker's lanes are busy,
// Acquires, Renews and Releases of other goroutines wait, and go out
// together in one pipeline, each with its own outcome (a busy Acquire,
// a lost Renew and a lost Release among them). Without the sharing
// they take a round trip each.
func TestConcurrentCallsShareRoundTrips(t *testing.T) {
	t.Parallel()
	pipelineClients(t, func(t *testing.T, client *redis.Client, gate *gateHook, count *scriptTrips, opts ...redislease.Option) {
		ctx := context.Background()
		l := mustNew(t, client, opts...)
		other := mustNew(t, client, opts...)
		var held []lease.Lease
		for i := range 8 {
			ls, err := other.Acquire(ctx, fmt.Sprintf("held/%d", i), "a", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, ls)
		}
		gone, err := other.Acquire(ctx, "gone", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Release(ctx, gone); err != nil {
			t.Fatal(err)
		}
		busy, err := other.Acquire(ctx, "busy", "someone else", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if busy, err = other.Renew(ctx, busy, time.Minute); err != nil { // the script cache has every script now
			t.Fatal(err)
		}
		done := busyLanes(t, l, gate)
		count.takeLog()

		const acquires = 10
		type result struct {
			what string
			err  error
		}
		results := make(chan result, acquires+len(held)+3)
		var wg sync.WaitGroup
		run := func(what string, f func() error) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results <- result{what, f()}
			}()
		}
		for i := range acquires {
			run(fmt.Sprintf("Acquire of free name %d", i), func() error {
				_, err := l.Acquire(ctx, fmt.Sprintf("free/%d", i), "b", time.Minute)
				return err
			})
		}
		for i, ls := range held {
			run(fmt.Sprintf("Renew %d", i), func() error {
				_, err := l.Renew(ctx, ls, time.Minute)
				return err
			})
		}
		run("Renew of a released tenure", func() error {
			if _, err := l.Renew(ctx, gone, time.Minute); !errors.Is(err, lease.ErrLost) {
				return fmt.Errorf("got %v, want ErrLost", err)
			}
			return nil
		})
		run("Release of a released tenure", func() error {
			if err := l.Release(ctx, gone); !errors.Is(err, lease.ErrLost) {
				return fmt.Errorf("got %v, want ErrLost", err)
			}
			return nil
		})
		run("Acquire of a held name", func() error {
			var held *lease.HeldError
			if _, err := l.Acquire(ctx, busy.Name, "b", time.Minute); !errors.As(err, &held) || held.Owner != "someone else" {
				return fmt.Errorf("got %v, want a HeldError naming %q", err, "someone else")
			}
			return nil
		})
		calls := acquires + len(held) + 3
		waitQueued(t, l, calls)
		gate.open()
		wg.Wait()
		done()
		close(results)
		for r := range results {
			if r.err != nil {
				t.Errorf("%s: %v", r.what, r.err)
			}
		}
		// The lanes' requests, one script each, and one pipeline for all
		// that waited. The queued calls were all waiting (waitQueued)
		// before the gate let the lanes' requests go; which goroutine
		// then reaches the counting hook first, a lane's or the pipeline
		// sent once a lane came back, is the scheduler's choice, so the
		// round trips are compared in order of size.
		trips := count.takeLog()
		sizes := make([]int, len(trips))
		for i, trip := range trips {
			sizes[i] = len(trip)
		}
		slices.Sort(sizes)
		if want := append(slices.Repeat([]int{1}, redislease.Lanes(l)), calls); !slices.Equal(sizes, want) {
			t.Errorf("%d calls while the lanes were busy, round trips with scripts: %v; want the lanes' %d of one script each, and one of %d", calls, trips, redislease.Lanes(l), calls)
		}
		for i := range acquires {
			got, err := l.Inspect(ctx, fmt.Sprintf("free/%d", i))
			if err != nil || got.Owner != "b" {
				t.Errorf("free/%d after its Acquire: %+v, %v", i, got, err)
			}
		}
	})
}

// TestQueuedCallEndsWithItsContext: a call waiting for a lane returns
// when its context ends, with the context's error and a message that
// says what it waited for, and is never sent.
func TestQueuedCallEndsWithItsContext(t *testing.T) {
	t.Parallel()
	pipelineClients(t, func(t *testing.T, client *redis.Client, gate *gateHook, count *scriptTrips, opts ...redislease.Option) {
		l := mustNew(t, client, opts...)
		warm, err := l.Acquire(context.Background(), "warm", "b", time.Minute) // the script cache has Acquire's script now
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(context.Background(), warm); err != nil {
			t.Fatal(err)
		}
		done := busyLanes(t, l, gate)
		count.takeLog()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err = l.Acquire(ctx, "late", "b", time.Minute)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for one of the") {
			t.Errorf("Acquire waiting for a lane past its deadline: %v; want DeadlineExceeded, waiting for a request under way", err)
		}
		if errors.Is(err, lease.ErrHeld) {
			t.Errorf("a timeout reads as held: %v", err)
		}
		gate.open()
		done()
		if trips := count.takeLog(); len(trips) != redislease.Lanes(l) {
			t.Errorf("round trips with scripts after the gate opened: %v; want only the lanes' %d", trips, redislease.Lanes(l))
		}
		if _, err := l.Inspect(context.Background(), "late"); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("the Acquire that gave up was sent after all: Inspect says %v", err)
		}
	})
}

// TestPipelineLoadsScripts: when the server's script cache lacks a
// script (a restart, SCRIPT FLUSH), a pipeline's EVALSHAs fail NOSCRIPT
// and go again as EVALs, in one more pipeline, and every call still gets
// its outcome. miniredis only: the shared server's cache is not ours to
// flush.
func TestPipelineLoadsScripts(t *testing.T) {
	t.Parallel()
	_, client, _ := newMiniredis(t)
	gate, count := newGateHook(), &scriptTrips{}
	client.AddHook(gate)
	client.AddHook(count)
	l := mustNew(t, client)
	ctx := context.Background()
	const n = 6
	var held []lease.Lease
	for i := range n {
		ls, err := l.Acquire(ctx, fmt.Sprintf("cold/%d", i), "b", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ls)
	}
	done := busyLanes(t, l, gate)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, ls := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Renew(ctx, ls, time.Minute)
			errs <- err
		}()
	}
	waitQueued(t, l, n)
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	count.takeLog()
	gate.open()
	wg.Wait()
	done()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Renew after SCRIPT FLUSH: %v", err)
		}
	}
	want := [][]string{slices.Repeat([]string{"evalsha"}, n), slices.Repeat([]string{"eval"}, n)}
	var got [][]string
	for _, trip := range count.takeLog() {
		if len(trip) == n {
			got = append(got, trip)
		}
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("pipelines of the %d Renews after SCRIPT FLUSH: %v; want %v", n, got, want)
	}
}
