package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/fence"
	"github.com/leasekit/lease/fence/redisfence"
)

// bothServers runs fn on miniredis and on LEASE_TEST_REDIS's server.
func bothServers(t *testing.T, fn func(t *testing.T, c redis.UniversalClient, tag string)) {
	for _, s := range []struct {
		name string
		make func(testing.TB) func(testing.TB) redis.UniversalClient
	}{{"miniredis", miniredisClients}, {"redis", realClients}} {
		t.Run(s.name, func(t *testing.T) {
			c := s.make(t)(t)
			tag := randomTag("unit")
			cleanupTag(t, c, tag)
			fn(t, c, tag)
		})
	}
}

// TestDoCommands tests several commands in one guarded write, their
// replies, and that a refusal runs none of them.
func TestDoCommands(t *testing.T) {
	bothServers(t, func(t *testing.T, c redis.UniversalClient, tag string) {
		ctx := context.Background()
		f, err := redisfence.New(c, tag)
		if err != nil {
			t.Fatal(err)
		}
		k := func(s string) string { return "{" + tag + "}:" + s }
		got, err := f.Do(ctx, "report", 10,
			redisfence.Cmd("SET", k("body"), "draft", "EX", 3600),
			redisfence.Cmd("hset", k("meta"), "author", "a", "rev", 1),
			redisfence.Cmd("INCRBY", k("writes"), 1),
			redisfence.Cmd("RPUSH", k("log"), "a wrote", "a wrote again"),
			redisfence.Cmd("DEL", k("missing")),
		)
		if err != nil {
			t.Fatal(err)
		}
		if want := "[OK 2 1 2 0]"; fmt.Sprint(got) != want {
			t.Fatalf("replies %v; want %s", got, want)
		}
		_, err = f.Do(ctx, "report", 9,
			redisfence.Cmd("SET", k("body"), "stale"),
			redisfence.Cmd("INCRBY", k("writes"), 1))
		var se *fence.StaleError
		if !errors.As(err, &se) || se.Max != 10 || se.Token != 9 || se.Name != "report" {
			t.Fatalf("stale Do: %v", err)
		}
		if v := c.Get(ctx, k("body")).Val(); v != "draft" {
			t.Fatalf("body reads %q after a refused write", v)
		}
		if v := c.Get(ctx, k("writes")).Val(); v != "1" {
			t.Fatalf("writes reads %q after a refused write", v)
		}
		if v := c.Get(ctx, f.Key("report")).Val(); v != "10" {
			t.Fatalf("the fence key %q holds %q; want 10", f.Key("report"), v)
		}
	})
}

// TestDoFailingCommand tests that a command Redis refuses fails the
// script without raising the maximum.
func TestDoFailingCommand(t *testing.T) {
	bothServers(t, func(t *testing.T, c redis.UniversalClient, tag string) {
		ctx := context.Background()
		f, _ := redisfence.New(c, tag)
		k := "{" + tag + "}:list"
		if _, err := f.Do(ctx, "n", 10, redisfence.Cmd("RPUSH", k, "x")); err != nil {
			t.Fatal(err)
		}
		_, err := f.Do(ctx, "n", 20, redisfence.Cmd("SET", k, "not a list"), redisfence.Cmd("INCRBY", k, 1))
		if err == nil || errors.Is(err, fence.ErrStale) {
			t.Fatalf("INCRBY on a string that is not a number: %v; want Redis's error", err)
		}
		// The SET before the failing command stays applied (Redis has no
		// rollback), but the maximum was not raised.
		if err := f.Check(ctx, "n", 15); err != nil {
			t.Fatalf("after a failed write with token 20, Check(15): %v; want accepted", err)
		}
	})
}

// TestDoRefusesBadCommands tests what is refused before anything is sent.
func TestDoRefusesBadCommands(t *testing.T) {
	// A client that sends nothing: its hook records each command and
	// fails it.
	var sent sync.Map
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer c.Close()
	c.AddHook(hook{process: func(cmd redis.Cmder) { sent.Store(cmd.Name(), true) }, stop: true})
	f, err := redisfence.New(c, "report")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, cmd := range []redisfence.Command{
		redisfence.Cmd("GET", "{report}:x"),
		redisfence.Cmd("RENAME", "{report}:x", "{report}:y"),
		redisfence.Cmd("EVAL", "{report}:x"),
		redisfence.Cmd("FLUSHALL", "{report}:x"),
		redisfence.Cmd("SET", "report:x", "v"),
		redisfence.Cmd("SET", "{other}:x", "v"),
		redisfence.Cmd("SET", "x{report}", "v"), // tag "report": allowed below
		redisfence.Cmd("SET", "{}{report}:x", "v"),
		redisfence.Cmd("SET", "{report", "v"),
		redisfence.Cmd("SET", f.Key("name"), "99999"),
		redisfence.Cmd("HSET", "{report}:h", make([]any, 4097)...),
	} {
		_, err := f.Do(ctx, "name", 1, cmd)
		if cmd.Key == "x{report}" {
			if errors.Is(err, lease.ErrInvalid) {
				t.Errorf("Do(%s %q): %v; the key's hash tag is the fence's", cmd.Name, cmd.Key, err)
			}
			continue
		}
		if !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Do(%s %q): %v; want ErrInvalid", cmd.Name, cmd.Key, err)
		}
	}
	for _, bad := range []struct {
		tag    string
		prefix string
	}{{"", "p:"}, {"a}b", "p:"}, {"ok", "p{"}, {"ok", "}"}, {"ok", ""}} {
		if _, err := redisfence.New(c, bad.tag, redisfence.WithPrefix(bad.prefix)); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("New(tag %q, prefix %q): %v; want ErrInvalid", bad.tag, bad.prefix, err)
		}
	}
	if _, err := redisfence.New(nil, "t"); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New(nil): %v", err)
	}
	n := 0
	sent.Range(func(k, _ any) bool { n++; t.Logf("sent %v", k); return true })
	if n != 1 { // only the allowed "x{report}" write tried the (absent) server
		t.Errorf("%d kinds of command were sent for refused writes", n)
	}
}

// TestDoManyArgs tests a command with the most arguments allowed.
func TestDoManyArgs(t *testing.T) {
	bothServers(t, func(t *testing.T, c redis.UniversalClient, tag string) {
		f, _ := redisfence.New(c, tag)
		args := make([]any, 4096)
		for i := range args {
			args[i] = fmt.Sprint(i)
		}
		got, err := f.Do(context.Background(), "n", 1, redisfence.Cmd("SADD", "{"+tag+"}:set", args...))
		if err != nil || fmt.Sprint(got) != "[4096]" {
			t.Fatalf("SADD of 4096 members: %v, %v", got, err)
		}
	})
}

// TestKeysOfLongNames tests the fence key of awkward names: whole, and on
// the Fence's hash tag whatever the name holds.
func TestKeysOfLongNames(t *testing.T) {
	c := redis.NewClient(&redis.Options{})
	defer c.Close()
	f, _ := redisfence.New(c, "report", redisfence.WithPrefix("app:fence:"))
	for _, name := range []string{"a}b{c}", "\x00", strings.Repeat("x", lease.MaxNameLen)} {
		k := f.Key(name)
		if !strings.HasPrefix(k, "app:fence:{report}:") || !strings.HasSuffix(k, name) {
			t.Errorf("Key(%.20q) = %.40q", name, k)
		}
	}
}

// hook calls process on every command; with stop set, it fails them
// instead of sending them.
type hook struct {
	process func(redis.Cmder)
	stop    bool
}

func (h hook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.process(cmd)
		if h.stop {
			return errors.New("test: not sent")
		}
		return next(ctx, cmd)
	}
}
func (h hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.process(c)
		}
		if h.stop {
			return errors.New("test: not sent")
		}
		return next(ctx, cmds)
	}
}
