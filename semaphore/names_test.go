package semaphore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/semaphore"
)

func TestSlotNameLayout(t *testing.T) {
	for _, c := range []struct {
		name  string
		index int
		want  string
	}{
		{"exports", 0, "lease.semaphore/exports#0"},
		{"exports", 3, "lease.semaphore/exports#3"},
		{"a#1", 0, "lease.semaphore/a#1#0"},
		{"gpu/node-7", 12, "lease.semaphore/gpu/node-7#12"},
		{"lease.semaphore/x#2", 1, "lease.semaphore/lease.semaphore/x#2#1"},
		{"sp ace\x00nul é", 1023, "lease.semaphore/sp ace\x00nul é#1023"},
	} {
		got := semaphore.SlotName(c.name, c.index)
		if got != c.want {
			t.Errorf("SlotName(%q, %d) = %q, want %q", c.name, c.index, got, c.want)
		}
		name, index, ok := semaphore.ParseSlotName(got)
		if !ok || name != c.name || index != c.index {
			t.Errorf("ParseSlotName(%q) = %q, %d, %v; want %q, %d, true", got, name, index, ok, c.name, c.index)
		}
	}
}

func TestParseSlotNameRefusesOtherNames(t *testing.T) {
	for _, s := range []string{
		"exports#0",                    // no prefix
		"lease.semaphore/exports",      // no index
		"lease.semaphore/#0",           // no name
		"lease.semaphore/exports#",     // empty index
		"lease.semaphore/exports#01",   // leading zero: SlotName never writes it
		"lease.semaphore/exports#-1",   // sign
		"lease.semaphore/exports#+1",   // sign
		"lease.semaphore/exports#1 ",   // trailing space
		"lease.semaphore/exports#1a",   // not decimal
		"lease.semaphore/exports#1024", // at MaxSlots
		"lease.semaphore/exports#99999999999999999999999",
	} {
		if name, index, ok := semaphore.ParseSlotName(s); ok {
			t.Errorf("ParseSlotName(%q) = %q, %d, true; want false", s, name, index)
		}
	}
}

// TestBadInputIsRefused: every bad argument is an error matching
// lease.ErrInvalid whose message names the problem, and nothing reaches
// the store.
func TestBadInputIsRefused(t *testing.T) {
	store := memory.New()
	ctx := t.Context()
	ttl := time.Second
	fn := func(context.Context, semaphore.Slot) error { return nil }
	long := strings.Repeat("x", lease.MaxNameLen-len(semaphore.Prefix)-2) // fits slot names up to "#9", not "#10"
	for _, c := range []struct {
		what string
		err  error
		want string
	}{
		{"capacity 0", acquire(store, "jobs", 0, "o", ttl), "capacity 0: want at least 1 slot"},
		{"capacity -1", acquire(store, "jobs", -1, "o", ttl), "capacity -1"},
		{"capacity above MaxSlots", acquire(store, "jobs", semaphore.MaxSlots+1, "o", ttl), "at most 1024 slots"},
		{"empty name", acquire(store, "", 2, "o", ttl), "name"},
		{"invalid UTF-8 name", acquire(store, "\xff", 2, "o", ttl), "UTF-8"},
		{"name too long for its slots", acquire(store, long, 11, "o", ttl), "use a name of at most"},
		{"empty owner", acquire(store, "jobs", 2, "", ttl), "owner"},
		{"ttl too short", acquire(store, "jobs", 2, "o", time.Millisecond), "ttl"},
		{"nil Locker", func() error { _, err := semaphore.Acquire(ctx, nil, "jobs", 2, "o", ttl); return err }(), "nil Locker"},
		{"Run: nil fn", semaphore.Run(ctx, store, "jobs", 2, ttl, nil), "nil fn"},
		{"Run: nil Locker", semaphore.Run(ctx, nil, "jobs", 2, ttl, fn), "nil Locker"},
		{"Run: negative wait", semaphore.Run(ctx, store, "jobs", 2, ttl, fn, semaphore.WithWait(-time.Second)), "negative wait"},
		{"Run: bad owner", semaphore.Run(ctx, store, "jobs", 2, ttl, fn, semaphore.WithOwner("")), "WithOwner"},
		{"Run: renewal after the ttl", semaphore.Run(ctx, store, "jobs", 2, ttl, fn, semaphore.WithRenewEvery(ttl)), "renewal every"},
		{"Run: zero renewal interval", semaphore.Run(ctx, store, "jobs", 2, ttl, fn, semaphore.WithRenewEvery(0)), "WithRenewEvery(0s)"},
		{"Run: negative min hold", semaphore.Run(ctx, store, "jobs", 2, ttl, fn, semaphore.WithMinHold(-time.Second)), "negative hold"},
		{"Run: nil option", semaphore.Run(ctx, store, "jobs", 2, ttl, fn, nil), "option 0 is nil"},
		{"Run: capacity 0", semaphore.Run(ctx, store, "jobs", 0, ttl, fn), "capacity 0"},
		{"Holders: negative capacity", holders(store, "jobs", -1), "capacity -1"},
	} {
		switch {
		case !errors.Is(c.err, lease.ErrInvalid):
			t.Errorf("%s: got %v, want an error matching lease.ErrInvalid", c.what, c.err)
		case !strings.Contains(c.err.Error(), c.want):
			t.Errorf("%s: %q does not say %q", c.what, c.err, c.want)
		}
	}
	if _, err := semaphore.Acquire(ctx, store, long, 10, "o", ttl); err != nil {
		t.Errorf("a name that fits with its slot names was refused: %v", err)
	}
	if got, err := store.List(ctx, ""); err != nil || len(got) != 1 {
		t.Errorf("the store holds %d leases (%v); want only the one valid Acquire's", len(got), err)
	}
}

func acquire(l lease.Locker, name string, n int, owner string, ttl time.Duration) error {
	_, err := semaphore.Acquire(context.Background(), l, name, n, owner, ttl)
	return err
}

func holders(l lease.Locker, name string, n int) error {
	_, err := semaphore.Holders(context.Background(), l, name, n)
	return err
}
