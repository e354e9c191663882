package testserver

import (
	"context"
	"testing"
	"time"
)

// waitUntil polls cond (each call bounded by 2s) until it returns nil,
// and fails t after timeout with cond's last error.
func waitUntil(t testing.TB, what string, timeout time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
	if err := poll(timeout, cond); err != nil {
		t.Fatalf("testserver: %s: still not after %s: %v", what, timeout, err)
	}
}

// poll calls cond until it returns nil or timeout passes, and returns
// cond's last error in that case.
func poll(timeout time.Duration, cond func(ctx context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := cond(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
