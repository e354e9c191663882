package redislease_test

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
)

// isReleaseScript reports whether a command runs release.lua (after
// marks.lua, as scripts.go assembles it), by EVALSHA or by EVAL.
func isReleaseScript(t *testing.T) func(args [][]byte) bool {
	t.Helper()
	marks, err := os.ReadFile("marks.lua")
	if err != nil {
		t.Fatal(err)
	}
	release, err := os.ReadFile("release.lua")
	if err != nil {
		t.Fatal(err)
	}
	src := append(append(marks, '\n'), release...)
	sum := sha1.Sum(src)
	sha := []byte(hex.EncodeToString(sum[:]))
	return func(args [][]byte) bool {
		if len(args) < 2 {
			return false
		}
		switch {
		case bytes.EqualFold(args[0], []byte("evalsha")):
			return bytes.EqualFold(args[1], sha)
		case bytes.EqualFold(args[0], []byte("eval")):
			return bytes.Equal(args[1], src)
		}
		return false
	}
}

// TestReleaseWhoseReplyIsLost loses the reply to a Release after Redis
// ran it, and breaks the connection, so that go-redis resends the script
// (issue 9, defect 5). The resend finds the tenure gone; it must still
// report the release that its first attempt made, not ErrLost, while a
// second, separate Release of the lease still reports ErrLost.
func TestReleaseWhoseReplyIsLost(t *testing.T) {
	t.Parallel()
	match := isReleaseScript(t)
	faultServers(t, func(t *testing.T, s faultServer) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p := startProxy(t, s.addr)
		l, err := redislease.Open(ctx, s.urlVia(p.Addr()))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		held, err := l.Acquire(ctx, "jobs/x", "owner-a", time.Minute)
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}

		p.DropReplyOnce(match)
		err = l.Release(ctx, held)
		if p.Dropped() != 1 {
			t.Fatalf("the proxy lost %d replies, want 1: the test no longer loses the Release's reply (Release returned %v)", p.Dropped(), err)
		}
		if err != nil {
			t.Fatalf("Release whose first reply was lost: %v; want nil, since Redis ran it and go-redis resent it", err)
		}

		// The tenure is gone, and the name is free for anyone at once.
		if _, err := l.Inspect(ctx, "jobs/x"); !errors.Is(err, lease.ErrNotHeld) {
			t.Fatalf("Inspect after the Release: %v; want ErrNotHeld", err)
		}
		if got, err := l.List(ctx, ""); err != nil || len(got) != 0 {
			t.Fatalf("List after the Release: %v, %v; want nothing", got, err)
		}
		next, err := l.Acquire(ctx, "jobs/x", "owner-b", time.Minute)
		if err != nil {
			t.Fatalf("Acquire by another owner after the Release: %v", err)
		}
		if next.Token <= held.Token {
			t.Fatalf("next tenure's token %d is not above the released one's, %d", next.Token, held.Token)
		}

		// A second, separate Release of the released lease is lost.
		if err := l.Release(ctx, held); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("second Release of a released lease: %v; want ErrLost", err)
		}
		if err := l.Release(ctx, next); err != nil {
			t.Fatalf("Release of the next tenure: %v", err)
		}
	})
}
