package redislease

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease/driver"
)

// TestReleaseRecognisesOnlyItsOwnResend drives release.lua with chosen
// nonces, as go-redis's resends of one call (same nonce) and separate
// calls (new nonces) do.
func TestReleaseRecognisesOnlyItsOwnResend(t *testing.T) {
	t.Parallel()
	mr, _, l := newMiniLocker(t)
	ctx := context.Background()
	held, err := l.Acquire(ctx, "jobs/x", "owner-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tenure := driver.Tenure{Name: held.Name, Owner: held.Owner, Token: held.Token}
	release := func(nonce string, want bool, what string) {
		t.Helper()
		ok, err := l.s.release(ctx, tenure, nonce)
		if err != nil || ok != want {
			t.Fatalf("%s: release = %v, %v; want %v", what, ok, err, want)
		}
	}

	release("call-1", true, "the first attempt")
	release("call-1", true, "a resend of the same call")
	release("call-2", false, "a second, separate Release")

	marker := l.s.keyBase("jobs/x") + releasedSuffix + strconv.FormatUint(held.Token, 10)
	if got := mr.TTL(marker); got <= 0 || got > releaseMarkerTTL {
		t.Fatalf("release marker %q expires in %s; want within %s", marker, got, releaseMarkerTTL)
	}

	// The marker does not hold the name: another owner takes it at once,
	// and a late resend of the first call reports its release without
	// touching the new tenure.
	next, err := l.Acquire(ctx, "jobs/x", "owner-b", time.Minute)
	if err != nil {
		t.Fatalf("Acquire after the release: %v", err)
	}
	release("call-1", true, "a resend after another owner acquired the name")
	if cur, err := l.Inspect(ctx, "jobs/x"); err != nil || cur.Owner != "owner-b" || cur.Token != next.Token {
		t.Fatalf("Inspect after the late resend = %v, %v; want owner-b's tenure %d intact", cur, err, next.Token)
	}

	// Past the marker's lifetime no resend of the call can exist any more:
	// the marker is gone, and the same nonce reads as a lost lease.
	mr.FastForward(releaseMarkerTTL)
	if mr.Exists(marker) {
		t.Fatalf("release marker %q outlived %s", marker, releaseMarkerTTL)
	}
	release("call-1", false, "the same nonce after the marker expired")
}

// TestNoncesDiffer checks that Release calls, also concurrent ones, never
// share a nonce, and that nonces carry this process's random prefix.
func TestNoncesDiffer(t *testing.T) {
	t.Parallel()
	const workers, each = 4, 1000
	got := make(chan string, workers*each)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				got <- nextNonce()
			}
		}()
	}
	wg.Wait()
	close(got)
	seen := make(map[string]bool, workers*each)
	for n := range got {
		if seen[n] || !strings.HasPrefix(n, noncePrefix) || len(noncePrefix) < 26 {
			t.Fatalf("nonce %q repeated or without the process prefix %q", n, noncePrefix)
		}
		seen[n] = true
	}
}
