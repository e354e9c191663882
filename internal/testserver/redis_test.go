package testserver_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/internal/testserver"
)

// redisClient returns a client of addr that does not retry, closed when t
// ends.
func redisClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 2 * time.Second, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ctx5 returns a context bounded by 5s for one step of a test.
func ctx5(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// refused reports whether dialling addr is refused: nothing listens.
func refused(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		_ = c.Close()
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// TestRedis: a private server answers, Restart empties it, Stop frees the
// port, Start brings it back on the same port, Kill is immediate.
func TestRedis(t *testing.T) {
	r := testserver.StartRedis(t, nil)
	if r.URL() != "redis://"+r.Addr()+"/0" {
		t.Errorf("URL() = %q", r.URL())
	}
	c := redisClient(t, r.Addr())
	if err := c.Set(ctx5(t), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	pid := r.Pid()
	r.Restart()
	if r.Pid() == pid || r.Pid() == 0 {
		t.Errorf("pid %d after Restart, was %d", r.Pid(), pid)
	}
	if n, err := c.Exists(ctx5(t), "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS after a restart without persistence = %d, %v; want 0", n, err)
	}
	r.Stop()
	if r.Running() || !refused(r.Addr()) {
		t.Fatalf("after Stop: running %v, connection refused %v", r.Running(), refused(r.Addr()))
	}
	r.Stop() // stopping a stopped server does nothing
	r.Start()
	if err := c.Ping(ctx5(t)).Err(); err != nil {
		t.Fatalf("PING after Start: %v", err)
	}
	r.Kill()
	if r.Running() || !refused(r.Addr()) {
		t.Fatalf("after Kill: running %v, connection refused %v", r.Running(), refused(r.Addr()))
	}

	r2 := testserver.StartRedis(t, nil) // a second one in the same test
	if r2.Name() == r.Name() || r2.Dir() == r.Dir() || r2.Addr() == r.Addr() {
		t.Errorf("two servers share a name, directory or address: %s %s %s, %s %s %s", r.Name(), r.Dir(), r.Addr(), r2.Name(), r2.Dir(), r2.Addr())
	}
}

// TestRedisPersist: with Persist, data written before a Kill is there
// after Start, and survives a Restart.
func TestRedisPersist(t *testing.T) {
	r := testserver.StartRedis(t, &testserver.RedisOptions{Persist: true})
	c := redisClient(t, r.Addr())
	if err := c.Incr(ctx5(t), "n").Err(); err != nil {
		t.Fatal(err)
	}
	r.Kill()
	r.Start()
	if n, err := c.Incr(ctx5(t), "n").Result(); err != nil || n != 2 {
		t.Fatalf("INCR after Kill and Start = %d, %v; want 2", n, err)
	}
	r.Restart()
	if n, err := c.Get(ctx5(t), "n").Int(); err != nil || n != 2 {
		t.Fatalf("GET after Restart = %d, %v; want 2", n, err)
	}
}

// TestRedisPause: a paused server keeps its port but answers nothing
// until Resume.
func TestRedisPause(t *testing.T) {
	r := testserver.StartRedis(t, &testserver.RedisOptions{Args: []string{"--maxclients", "100"}})
	c := redisClient(t, r.Addr())
	if err := c.Ping(ctx5(t)).Err(); err != nil {
		t.Fatal(err)
	}
	r.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err := c.Ping(ctx).Err()
	cancel()
	if err == nil {
		t.Fatal("a paused server answered PING")
	}
	r.Resume()
	if err := c.Ping(ctx5(t)).Err(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
	r.Pause() // cleanup must end a paused server too
}
