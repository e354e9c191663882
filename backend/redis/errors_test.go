package redislease_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
	"github.com/leasekit/lease/internal/testenv"
)

// sentinels are the lease errors that a failed request must never match.
var sentinels = []error{lease.ErrHeld, lease.ErrLost, lease.ErrNotHeld, lease.ErrInvalid, lease.ErrClosed}

// mustBeStoreError fails t unless err is a wrapped store error that
// matches want (when set), says "lease/redis", and matches no sentinel.
func mustBeStoreError(t *testing.T, op string, err, want error, contains string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded; want a store error", op)
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			t.Fatalf("%s: store error %v matches %v", op, err, s)
		}
	}
	if want != nil && !errors.Is(err, want) {
		t.Fatalf("%s: error %v does not wrap %v", op, err, want)
	}
	if !strings.HasPrefix(err.Error(), "lease/redis: ") || !strings.Contains(err.Error(), contains) {
		t.Fatalf("%s: error %q lacks the prefix lease/redis: or %q", op, err, contains)
	}
}

// everyOp calls each Locker method once and checks its error with check.
func everyOp(t *testing.T, l *redislease.Locker, check func(op string, err error)) {
	t.Helper()
	ctx := context.Background()
	held := lease.Lease{Name: "jobs/x", Owner: "owner", Token: 1}
	_, err := l.Acquire(ctx, "jobs/x", "owner", time.Second)
	check("Acquire", err)
	_, err = l.Renew(ctx, held, time.Second)
	check("Renew", err)
	check("Release", l.Release(ctx, held))
	_, err = l.Inspect(ctx, "jobs/x")
	check("Inspect", err)
	_, err = l.ForceRelease(ctx, "jobs/x")
	check("ForceRelease", err)
	_, err = l.List(ctx, "")
	check("List", err)
}

func TestRefusedConnectionIsWrapped(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second})
	defer client.Close()
	everyOp(t, mustNew(t, client), func(op string, err error) {
		mustBeStoreError(t, op, err, syscall.ECONNREFUSED, "connection refused")
	})
	_, err := redislease.Open(context.Background(), "redis://127.0.0.1:1/0?max_retries=-1")
	mustBeStoreError(t, "Open", err, syscall.ECONNREFUSED, "connection refused")
	if _, err := lease.Open(context.Background(), "redis://127.0.0.1:1/0?max_retries=-1"); err == nil || errors.Is(err, lease.ErrHeld) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("lease.Open of a refused address: %v", err)
	}
}

// silentServer accepts connections and never answers, until t ends.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

func TestTimeoutIsWrapped(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{
		Addr: silentServer(t), MaxRetries: -1, ReadTimeout: 50 * time.Millisecond,
		Protocol: 2, DisableIdentity: true, // no HELLO/CLIENT SETINFO handshake to wait on
	})
	defer client.Close()
	everyOp(t, mustNew(t, client), func(op string, err error) {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("%s: got %v; want a wrapped timeout", op, err)
		}
		mustBeStoreError(t, op, err, nil, "timeout")
	})
}

func TestContextErrorsAreWrapped(t *testing.T) {
	t.Parallel()
	_, client, _ := newMiniredis(t)
	l := mustNew(t, client)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := l.Acquire(ctx, "jobs/x", "owner", time.Second)
	mustBeStoreError(t, "Acquire with a canceled context", err, context.Canceled, "canceled")
	ctx, cancel = context.WithTimeout(context.Background(), -time.Second)
	defer cancel()
	_, err = l.Inspect(ctx, "jobs/x")
	mustBeStoreError(t, "Inspect past its deadline", err, context.DeadlineExceeded, "deadline")
}

// TestReadOnlyReplicaIsWrapped makes the server answer every command as a
// read-only replica does.
func TestReadOnlyReplicaIsWrapped(t *testing.T) {
	t.Parallel()
	mr, _, _ := newMiniredis(t)
	// go-redis retries READONLY (a failover may be under way); do not
	// wait for that here.
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer client.Close()
	if err := client.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	mr.SetError("READONLY You can't write against a read only replica.")
	everyOp(t, mustNew(t, client), func(op string, err error) {
		var re redis.Error
		if !errors.As(err, &re) {
			t.Fatalf("%s: got %v; want a wrapped redis.Error", op, err)
		}
		mustBeStoreError(t, op, err, nil, "READONLY")
	})
}

// TestScriptErrorsAreWrapped plants keys that this package never writes
// and checks that the scripts' errors come back wrapped.
func TestScriptErrorsAreWrapped(t *testing.T) {
	t.Parallel()
	mr, client, _ := newMiniredis(t)
	l := mustNew(t, client)
	ctx := context.Background()
	held, err := l.Acquire(ctx, "jobs/x", "owner", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var leaseKey string
	for _, k := range mr.Keys() {
		if strings.HasSuffix(k, ":lease") {
			leaseKey = k
		}
	}

	// The lease hash names another name: a digest collision, or a
	// hand-edited key. Acquire and Inspect refuse to guess.
	mr.HSet(leaseKey, "name", "jobs/other")
	_, err = l.Acquire(ctx, "jobs/x", "owner", time.Minute)
	mustBeStoreError(t, "Acquire over a lease key of another name", err, nil, "holds another name")
	_, err = l.Inspect(ctx, "jobs/x")
	mustBeStoreError(t, "Inspect of a lease key of another name", err, nil, "holds another name")
	_, err = l.ForceRelease(ctx, "jobs/x")
	mustBeStoreError(t, "ForceRelease of a lease key of another name", err, nil, "holds another name")

	// The lease key is a string: every script fails with WRONGTYPE.
	mr.Del(leaseKey)
	if err := mr.Set(leaseKey, "junk"); err != nil {
		t.Fatal(err)
	}
	everyOp(t, l, func(op string, err error) {
		mustBeStoreError(t, op, err, nil, "WRONGTYPE")
	})
	_, err = l.Renew(ctx, held, time.Minute)
	mustBeStoreError(t, "Renew of the real tenure", err, nil, "WRONGTYPE")

	// A lease key without expiry, written by hand.
	mr.Del(leaseKey)
	mr.HSet(leaseKey, "name", "jobs/x", "owner", "owner", "token", "7")
	_, err = l.Inspect(ctx, "jobs/x")
	mustBeStoreError(t, "Inspect of a lease key without expiry", err, nil, "no expiry")
}

func TestCloseLeavesTheCallersClientOpen(t *testing.T) {
	t.Parallel()
	_, client, _ := newMiniredis(t)
	l := mustNew(t, client)
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := client.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("the caller's client was closed by Locker.Close: %v", err)
	}
	everyOp(t, l, func(op string, err error) {
		if !errors.Is(err, lease.ErrClosed) {
			t.Fatalf("%s after Close: got %v; want ErrClosed", op, err)
		}
	})
}
