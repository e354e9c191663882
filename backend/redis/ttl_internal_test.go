package redislease

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestTTLRoundsUpToWholeMilliseconds(t *testing.T) {
	t.Parallel()
	for ttl, want := range map[time.Duration]int64{
		time.Millisecond:                    1,
		time.Millisecond + time.Nanosecond:  2,
		1500 * time.Microsecond:             2,
		time.Second - time.Nanosecond:       1000,
		time.Minute:                         60000,
		365 * 24 * time.Hour:                365 * 24 * 3600 * 1000,
		365*24*time.Hour - time.Microsecond: 365 * 24 * 3600 * 1000,
	} {
		if got := ttlMillis(ttl); got != want {
			t.Errorf("ttlMillis(%s) = %d, want %d", ttl, got, want)
		}
	}

	mr, _, l := newMiniLocker(t)
	got, err := l.Acquire(context.Background(), "jobs/x", "owner", 5500*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	lk, _ := l.s.keys("jobs/x")
	if ttl := mr.TTL(lk); ttl != 6*time.Millisecond {
		t.Fatalf("a ttl of 5.5ms set a key TTL of %s, want 6ms", ttl)
	}
	if _, err := l.Renew(context.Background(), got, 7500*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	if ttl := mr.TTL(lk); ttl != 8*time.Millisecond {
		t.Fatalf("a renewal for 7.5ms set a key TTL of %s, want 8ms", ttl)
	}
}

// TestTokenMemoryAgrees checks that acquire.lua keeps a name's last token
// for tokenMemory, which the documentation and the tests rely on.
func TestTokenMemoryAgrees(t *testing.T) {
	t.Parallel()
	want := fmt.Sprintf("local TOKEN_MEMORY_MS = %d\n", tokenMemory.Milliseconds())
	if !strings.Contains(acquireSrc, want) {
		t.Fatalf("acquire.lua does not say %q", want)
	}
}
