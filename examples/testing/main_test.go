package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
)

// newStore is the swap: a memory store on a clock the test moves, in
// place of the SQLite, Postgres, Redis or etcd store main opens.
func newStore() (*memory.Locker, *memory.ManualClock) {
	clock := memory.NewManualClock(time.Now())
	return memory.New(memory.WithClock(clock)), clock
}

func TestRun(t *testing.T) {
	store, _ := newStore()
	var out strings.Builder
	if err := run(context.Background(), store, "send-invoices", &out); err != nil {
		t.Fatal(err)
	}
	if want := "job/send-invoices: claimed with token 1\njob/send-invoices: done, released\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	if _, err := store.Inspect(context.Background(), "job/send-invoices"); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("run left its lease behind: %v", err)
	}
}

func TestSecondWorkerIsTurnedAway(t *testing.T) {
	ctx := context.Background()
	store, _ := newStore()
	w1 := &Worker{Locker: store, ID: "worker-1", TTL: time.Minute}
	w2 := &Worker{Locker: store, ID: "worker-2", TTL: time.Minute}
	if _, err := w1.Claim(ctx, "send-invoices"); err != nil {
		t.Fatal(err)
	}
	_, err := w2.Claim(ctx, "send-invoices")
	var busy *lease.HeldError
	if !errors.As(err, &busy) || busy.Owner != "worker-1" {
		t.Fatalf("second claim: got %v, want a HeldError naming worker-1", err)
	}
}

// A worker that crashes holding a job blocks it for one TTL, no longer:
// the test moves the store's clock instead of waiting a minute.
func TestCrashedWorkersJobIsTakenOverAfterTTL(t *testing.T) {
	ctx := context.Background()
	store, clock := newStore()
	w1 := &Worker{Locker: store, ID: "worker-1", TTL: time.Minute}
	w2 := &Worker{Locker: store, ID: "worker-2", TTL: time.Minute}
	first, err := w1.Claim(ctx, "send-invoices")
	if err != nil {
		t.Fatal(err)
	}
	// worker-1 crashes: it never renews or releases.

	clock.Advance(59 * time.Second)
	if _, err := w2.Claim(ctx, "send-invoices"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("claim 1s before the crashed worker's lease expires: got %v, want ErrHeld", err)
	}

	clock.Advance(time.Second)
	second, err := w2.Claim(ctx, "send-invoices")
	if err != nil {
		t.Fatalf("claim after the crashed worker's lease expired: %v", err)
	}
	if second.Token <= first.Token {
		t.Errorf("takeover token %d is not larger than the crashed worker's %d", second.Token, first.Token)
	}
	// Were worker-1 to come back, its lease is gone.
	if _, err := store.Renew(ctx, first, time.Minute); !errors.Is(err, lease.ErrLost) {
		t.Errorf("the crashed worker's Renew: got %v, want ErrLost", err)
	}
}
