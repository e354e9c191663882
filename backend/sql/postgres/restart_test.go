package postgreslease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/testserver"
)

// TestRestartKeepsTenures restarts a private PostgreSQL server
// (internal/testserver; never the shared one) while tenures are held,
// first gracefully (pg_ctl restart -m fast) and then as a crash (SIGKILL
// of every server process, recovery from the WAL), with the same Locker
// throughout (issue 9, store restarts). What must hold:
//
//   - While the server is down, every call fails as a store failure by its
//     context's deadline: never held, lost or not held.
//   - Once it is back, the same pool serves again without the application
//     reopening anything, and the tenures are intact: committed rows
//     survive, so Renew keeps each tenure with its token, another owner
//     still gets ErrHeld, and a new tenure's token is greater than all.
func TestRestartKeepsTenures(t *testing.T) {
	p := testserver.StartPostgres(t, nil)
	ctx := context.Background()
	l, err := Open(ctx, p.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	held, err := l.Acquire(ctx, "restart/held", "holder", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	maxToken := held.Token

	for _, outage := range []struct {
		what string
		stop func()
	}{
		{"a fast shutdown", p.Stop},
		{"a crash", p.Kill},
	} {
		outage.stop()
		for _, call := range []struct {
			op string
			fn func(context.Context) error
		}{
			{"Acquire", func(ctx context.Context) error {
				_, err := l.Acquire(ctx, "restart/held", "other", time.Minute)
				return err
			}},
			{"Renew", func(ctx context.Context) error { _, err := l.Renew(ctx, held, 5*time.Minute); return err }},
			{"Inspect", func(ctx context.Context) error { _, err := l.Inspect(ctx, "restart/held"); return err }},
		} {
			cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			start := time.Now()
			err := call.fn(cctx)
			took := time.Since(start)
			cancel()
			if err == nil || errors.Is(err, lease.ErrHeld) || errors.Is(err, lease.ErrLost) || errors.Is(err, lease.ErrNotHeld) {
				t.Errorf("%s while PostgreSQL is down after %s: %v; want a store failure", call.op, outage.what, err)
			}
			if took > 3*time.Second {
				t.Errorf("%s while PostgreSQL is down after %s took %s with a 500ms context", call.op, outage.what, took)
			}
		}
		p.Start()

		// The pool recovers on its own: connections broken by the restart
		// are discarded, new ones dialled. Bounded in count and time.
		var renewed lease.Lease
		deadline := time.Now().Add(20 * time.Second)
		for attempt := 1; ; attempt++ {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			renewed, err = l.Renew(cctx, held, 5*time.Minute)
			cancel()
			if err == nil {
				if attempt > 2 {
					t.Logf("after %s, Renew succeeded at attempt %d", outage.what, attempt)
				}
				break
			}
			if errors.Is(err, lease.ErrLost) {
				t.Fatalf("Renew after %s: %v; a committed tenure must survive a restart", outage.what, err)
			}
			if attempt >= 50 || time.Now().After(deadline) {
				t.Fatalf("Renew after %s: still %v after %d attempts; the pool did not recover", outage.what, err, attempt)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if renewed.Token != held.Token {
			t.Fatalf("Renew after %s: token %d; want the tenure's %d", outage.what, renewed.Token, held.Token)
		}
		held = renewed
		var he *lease.HeldError
		if _, err := l.Acquire(ctx, "restart/held", "other", time.Minute); !errors.As(err, &he) || he.Owner != "holder" {
			t.Errorf("Acquire by another owner after %s: %v; want ErrHeld by holder", outage.what, err)
		}
		fresh, err := l.Acquire(ctx, "restart/fresh/"+outage.what, "holder", time.Minute)
		if err != nil {
			t.Fatalf("Acquire of a new name after %s: %v", outage.what, err)
		}
		if fresh.Token <= maxToken {
			t.Errorf("new tenure after %s: token %d, not above %d handed out before", outage.what, fresh.Token, maxToken)
		}
		maxToken = fresh.Token
	}
	if err := l.Release(ctx, held); err != nil {
		t.Errorf("Release after both outages: %v", err)
	}
}
