package testserver

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/leasekit/lease/internal/testenv"
)

// RedisOptions configures StartRedis. A nil *RedisOptions is the zero
// value: a server without persistence.
type RedisOptions struct {
	// Persist keeps the data across Stop, Kill and Restart: an
	// append-only file that Redis writes and fsyncs before it answers
	// each write (appendfsync always), so even Kill loses nothing
	// acknowledged. Without it the server keeps nothing, and every start
	// begins empty, as after a FLUSHALL.
	Persist bool
	// Args are extra redis-server arguments, such as "--maxmemory",
	// "10mb". They come last, so they override the helper's.
	Args []string
}

// StartRedis starts a private redis-server on a free loopback port with
// its own data directory, waits until it answers PING, and stops it when
// the test ends. Its URL is "redis://127.0.0.1:port/0".
//
// It skips the test (fails it under LEASE_TEST_REQUIRE_ALL=1) when
// redis-server is not installed (Debian package redis-server).
func StartRedis(t testing.TB, opts *RedisOptions) *Process {
	t.Helper()
	testenv.Slow(t) // starts server processes
	if opts == nil {
		opts = &RedisOptions{}
	}
	bin := redisServer(t)
	ports, err := freePorts(1)
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	p := newRedis(t, bin, "redis", ports[0], opts.Persist, nil, opts.Args)
	p.launch()
	return p
}

// needUnix skips (or fails) t where servers cannot run.
func needUnix(t testing.TB) {
	t.Helper()
	if !supported {
		testenv.Unavailable(t, "testserver needs a Unix system to run servers")
	}
}

// redisServer returns the path of redis-server, or skips t.
func redisServer(t testing.TB) string {
	t.Helper()
	needUnix(t)
	return testenv.RequireBinary(t, "redis-server", "redis-server")
}

// newRedis prepares a redis-server process on port; mode holds arguments
// for replication or cluster mode, extra the caller's own.
func newRedis(t testing.TB, bin, name string, port int, persist bool, mode, extra []string) *Process {
	t.Helper()
	dir, err := mkdir(t, name)
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	appendonly := "no"
	if persist {
		appendonly = "yes"
	}
	argv := []string{bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--daemonize", "no",
		"--logfile", "",
		"--save", "",
		"--appendonly", appendonly,
		"--appendfsync", "always",
		"--protected-mode", "no",
	}
	argv = append(append(argv, mode...), extra...)
	addr := loopback(port)
	p, err := newProcess(t, name, addr, dir, argv...)
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	p.url = fmt.Sprintf("redis://%s/0", addr)
	p.ready = pingRedis(addr)
	return p
}
