package redisfence_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/fence/fencetest"
	"github.com/leasekit/lease/fence/redisfence"
	"github.com/leasekit/lease/internal/testenv"
)

// randomTag returns a hash tag no other test run uses.
func randomTag(label string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "fencetest:" + label + ":" + hex.EncodeToString(b[:])
}

// target is a Fence and the string keys it guards, under its hash tag.
type target struct {
	f *redisfence.Fence
	c redis.UniversalClient
}

func (tg target) Check(ctx context.Context, name string, token uint64) error {
	return tg.f.Check(ctx, name, token)
}

func (tg target) dataKey(key string) string { return "{" + tg.f.Tag() + "}:data:" + key }

func (tg target) Write(ctx context.Context, name string, token uint64, key, value string) error {
	_, err := tg.f.Do(ctx, name, token, redisfence.Cmd("SET", tg.dataKey(key), value))
	return err
}

func (tg target) Read(ctx context.Context, key string) (string, bool, error) {
	v, err := tg.c.Get(ctx, tg.dataKey(key)).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	return v, err == nil, err
}

// harness returns a Harness whose Targets each have a new client from
// newClient, all on one hash tag.
func harness(t testing.TB, newClient func(t testing.TB) redis.UniversalClient) fencetest.Harness {
	tag := randomTag("suite")
	cleanupTag(t, newClient(t), tag)
	return fencetest.Harness{
		New: func(t testing.TB) fencetest.Target {
			c := newClient(t)
			f, err := redisfence.New(c, tag)
			if err != nil {
				t.Fatal(err)
			}
			return target{f, c}
		},
	}
}

// cleanupTag deletes every key under tag when t ends (a shared server
// must not fill up with test keys; never FLUSHDB).
func cleanupTag(t testing.TB, c redis.UniversalClient, tag string) {
	t.Cleanup(func() {
		ctx := context.Background()
		var keys []string
		scan := func(ctx context.Context, m *redis.Client) error {
			iter := m.Scan(ctx, 0, "*{"+globEscape(tag)+"}*", 1000).Iterator()
			for iter.Next(ctx) {
				keys = append(keys, iter.Val())
			}
			return iter.Err()
		}
		var err error
		switch c := c.(type) {
		case *redis.ClusterClient:
			err = c.ForEachMaster(ctx, scan)
		case *redis.Client:
			err = scan(ctx, c)
		}
		if err != nil {
			t.Errorf("scanning keys of {%s}: %v", tag, err)
			return
		}
		for _, k := range keys {
			if err := c.Del(ctx, k).Err(); err != nil {
				t.Errorf("deleting %q: %v", k, err)
				return
			}
		}
	})
}

func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\', '^', '-':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// miniredisClients returns a function making clients of one miniredis.
func miniredisClients(t testing.TB) func(testing.TB) redis.UniversalClient {
	mr := miniredis.RunT(t)
	return func(t testing.TB) redis.UniversalClient {
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
}

// realClients returns a function making clients of LEASE_TEST_REDIS's
// server, or skips.
func realClients(t testing.TB) func(testing.TB) redis.UniversalClient {
	raw := testenv.Lookup(t, "LEASE_TEST_REDIS")
	opts, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatalf("LEASE_TEST_REDIS=%q: %v", raw, err)
	}
	return func(t testing.TB) redis.UniversalClient {
		c := redis.NewClient(opts)
		t.Cleanup(func() { _ = c.Close() })
		if err := c.Ping(context.Background()).Err(); err != nil {
			t.Fatalf("LEASE_TEST_REDIS=%q: %v", raw, err)
		}
		return c
	}
}

// privateRedis is a redis-server this test started on its own port, with
// its data in a directory of its own, so that it can be restarted.
type privateRedis struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string
	cmd  *exec.Cmd
}

// startPrivateRedis starts redis-server with extra arguments, or skips
// when the binary is missing (fails when LEASE_TEST_REQUIRE_ALL=1, as CI
// installs it).
func startPrivateRedis(t testing.TB, args ...string) *privateRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv(testenv.RequireAll) == "1" {
			t.Fatalf("redis-server is not installed and %s=1: this test needs it", testenv.RequireAll)
		}
		t.Skip("redis-server is not installed: skipping the test on a private Redis")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p := &privateRedis{t: t, bin: bin, dir: t.TempDir(), port: port, args: args}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *privateRedis) addr() string { return fmt.Sprintf("127.0.0.1:%d", p.port) }

func (p *privateRedis) start() {
	p.t.Helper()
	args := append([]string{"--port", fmt.Sprint(p.port), "--bind", "127.0.0.1", "--dir", p.dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no",
		"--logfile", filepath.Join(p.dir, "redis.log")}, p.args...)
	p.cmd = exec.Command(p.bin, args...)
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("starting redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: p.addr()})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(p.dir, "redis.log"))
			p.t.Fatalf("redis-server on port %d did not answer within 10s:\n%s", p.port, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restart stops the server (SHUTDOWN, which writes its append-only file)
// and starts it again on the same port and data.
func (p *privateRedis) restart() {
	p.t.Helper()
	p.stop()
	p.start()
}

func (p *privateRedis) stop() {
	if p.cmd == nil {
		return
	}
	c := redis.NewClient(&redis.Options{Addr: p.addr()})
	_ = c.Shutdown(context.Background()).Err() // the connection drops: an error
	c.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	p.cmd = nil
}
