package redislease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
	"github.com/leasekit/lease/internal/testenv"
	"github.com/leasekit/lease/internal/testserver"
)

// TestRestartWithoutPersistence restarts a private redis-server that keeps
// nothing on disk (internal/testserver; never the shared one) while
// tenures are held, as an operator's restart or a crash of a cache-only
// Redis would (issue 9, store restarts). What must hold:
//
//   - While the server is down, every call fails as a store failure by its
//     context's deadline: never held, lost or not held.
//   - After it comes back empty, the holders find out at their next
//     Renew or Release: ErrLost, not a store error and not a silent
//     success, and Inspect says no one holds the names.
//   - A new tenure's token is still greater than every token handed out
//     before the restart (the time floor), so fenced writes stay safe.
//   - A lease.Run that held a name through the restart has its work's
//     context cancelled with a cause matching ErrLost, and returns.
func TestRestartWithoutPersistence(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	p := testserver.StartRedis(t, nil)
	ctx := context.Background()
	l, err := redislease.Open(ctx, p.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	names := []string{"restart/a", "restart/b", "restart/c"}
	held := make([]lease.Lease, len(names))
	var maxToken uint64
	for i, name := range names {
		if held[i], err = l.Acquire(ctx, name, "before", time.Minute); err != nil {
			t.Fatalf("Acquire %q: %v", name, err)
		}
		maxToken = max(maxToken, held[i].Token)
	}

	// A Run holding a name through the restart, renewing every 200ms.
	entered := make(chan context.Context, 1)
	ran := make(chan error, 1)
	go func() {
		ran <- lease.Run(ctx, l, "restart/run", 30*time.Second, func(ctx context.Context) error {
			entered <- ctx
			<-ctx.Done()
			return context.Cause(ctx)
		}, lease.WithRenewEvery(200*time.Millisecond))
	}()
	var runCtx context.Context
	select {
	case runCtx = <-entered:
	case err := <-ran:
		t.Fatalf("Run: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not enter fn within 20s")
	}
	runLease, _ := lease.FromContext(runCtx)
	maxToken = max(maxToken, runLease.Token)

	p.Stop()
	// Down: store failures by the deadline, never a verdict on the tenure.
	for _, call := range []struct {
		op string
		fn func(context.Context) error
	}{
		{"Acquire", func(ctx context.Context) error {
			_, err := l.Acquire(ctx, "restart/a", "other", time.Minute)
			return err
		}},
		{"Renew", func(ctx context.Context) error { _, err := l.Renew(ctx, held[0], time.Minute); return err }},
		{"Release", func(ctx context.Context) error { return l.Release(ctx, held[1]) }},
		{"Inspect", func(ctx context.Context) error { _, err := l.Inspect(ctx, "restart/a"); return err }},
	} {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		start := time.Now()
		err := call.fn(cctx)
		took := time.Since(start)
		cancel()
		if err == nil || errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("%s while Redis is down: %v; want a store failure", call.op, err)
		}
		if took > 3*time.Second {
			t.Errorf("%s while Redis is down took %s with a 500ms context", call.op, took)
		}
	}
	p.Start()

	// Back, empty: the holders find out, exactly.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := l.Renew(ctx, held[0], time.Minute)
		if errors.Is(err, lease.ErrLost) {
			break
		}
		if err == nil {
			t.Fatal("Renew after a restart without persistence succeeded; the tenure is gone")
		}
		if time.Now().After(deadline) {
			t.Fatalf("Renew after the restart: still %v after 20s; want ErrLost", err)
		}
		time.Sleep(100 * time.Millisecond) // the pool reconnects
	}
	if err := l.Release(ctx, held[1]); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Release after the restart: %v; want ErrLost", err)
	}
	if got, err := l.Inspect(ctx, "restart/c"); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Inspect after the restart: %v, %v; want ErrNotHeld", got, err)
	}

	// Tokens keep growing.
	for _, name := range names {
		got, err := l.Acquire(ctx, name, "after", time.Minute)
		if err != nil {
			t.Fatalf("Acquire %q after the restart: %v", name, err)
		}
		if got.Token <= maxToken {
			t.Errorf("Acquire %q after the restart: token %d, not above %d handed out before it", name, got.Token, maxToken)
		}
	}

	// The Run's work is told, with a cause matching ErrLost.
	select {
	case err := <-ran:
		if !errors.Is(err, lease.ErrLost) {
			t.Errorf("Run held through the restart returned %v; want an error matching ErrLost", err)
		}
		if cause := context.Cause(runCtx); !errors.Is(cause, lease.ErrLost) {
			t.Errorf("fn's context cause: %v; want one matching ErrLost", cause)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Run held through the restart did not return within 30s (token %d)", runLease.Token)
	}
}
