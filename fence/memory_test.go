package fence_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/leasekit/lease/fence"
	"github.com/leasekit/lease/fence/fencetest"
)

// memoryTarget is a Memory and the map it guards.
type memoryTarget struct {
	m    *fence.Memory
	mu   *sync.Mutex
	data map[string]string
}

func newMemoryTarget() memoryTarget {
	return memoryTarget{m: &fence.Memory{}, mu: &sync.Mutex{}, data: map[string]string{}}
}

func (tg memoryTarget) Check(ctx context.Context, name string, token uint64) error {
	return tg.m.Check(ctx, name, token)
}

func (tg memoryTarget) Write(ctx context.Context, name string, token uint64, key, value string) error {
	return tg.m.Guard(ctx, name, token, func() error {
		tg.mu.Lock()
		defer tg.mu.Unlock()
		tg.data[key] = value
		return nil
	})
}

func (tg memoryTarget) Read(_ context.Context, key string) (string, bool, error) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	v, ok := tg.data[key]
	return v, ok, nil
}

// TestFencetestMemory runs the shared cases against Memory. A Memory's
// store is the value itself, so every Target shares one.
func TestFencetestMemory(t *testing.T) {
	tg := newMemoryTarget()
	fencetest.Run(t, fencetest.Harness{New: func(testing.TB) fencetest.Target { return tg }})
}

// TestMemoryGuardFailedWrite tests that a write that fails leaves the
// maximum where it was, as a rolled-back transaction would.
func TestMemoryGuardFailedWrite(t *testing.T) {
	var m fence.Memory
	ctx := context.Background()
	if err := m.Check(ctx, "n", 10); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	if err := m.Guard(ctx, "n", 20, func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Guard with a failing write: got %v, want the write's error", err)
	}
	if got := m.Max("n"); got != 10 {
		t.Fatalf("after a failed write with token 20 the maximum is %d, want 10", got)
	}
	called := false
	err := m.Guard(ctx, "n", 5, func() error { called = true; return nil })
	if !errors.Is(err, fence.ErrStale) || called {
		t.Fatalf("stale Guard: err %v, write called %v; want ErrStale without the write", err, called)
	}
}
