package redisfence_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/fence/redisfence"
)

// commandLog records the commands a client sends, through a hook.
type commandLog struct {
	mu   sync.Mutex
	cmds []string
}

func (l *commandLog) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.Join(l.cmds, " ")
	l.cmds = nil
	return s
}

// TestCommandsPerWrite counts what a guarded write sends next to the same
// write unguarded: one EVALSHA where the plain write is one SET, one
// round trip each, accepted or refused; two (EVALSHA, then EVAL) the first
// time a server lacks the script.
func TestCommandsPerWrite(t *testing.T) {
	bothServers(t, func(t *testing.T, c redis.UniversalClient, tag string) {
		ctx := context.Background()
		log := &commandLog{}
		c.AddHook(hook{process: func(cmd redis.Cmder) {
			log.mu.Lock()
			log.cmds = append(log.cmds, cmd.Name())
			log.mu.Unlock()
		}})
		f, _ := redisfence.New(c, tag)
		key := "{" + tag + "}:body"
		// Open the connection first: its handshake is not the write's.
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		log.take()
		if _, err := f.Do(ctx, "n", 10, redisfence.Cmd("SET", key, "v")); err != nil {
			t.Fatal(err)
		}
		first := log.take()
		t.Logf("first guarded write: %s", first)
		if first != "evalsha" && first != "evalsha eval" {
			t.Errorf("first guarded write sent %q; want evalsha, or evalsha eval when the script was not cached", first)
		}
		check := func(what, want string, run func() error, wantErr bool) {
			t.Helper()
			if err := run(); (err != nil) != wantErr {
				t.Fatalf("%s: %v", what, err)
			}
			got := log.take()
			t.Logf("%s: %s", what, got)
			if got != want {
				t.Errorf("%s sent %q; want %q", what, got, want)
			}
		}
		check("unguarded SET", "set", func() error { return c.Set(ctx, key, "v", 0).Err() }, false)
		check("guarded SET, accepted", "evalsha", func() error {
			_, err := f.Do(ctx, "n", 10, redisfence.Cmd("SET", key, "v"))
			return err
		}, false)
		check("guarded SET, refused", "evalsha", func() error {
			_, err := f.Do(ctx, "n", 9, redisfence.Cmd("SET", key, "v"))
			return err
		}, true)
		check("three guarded commands", "evalsha", func() error {
			_, err := f.Do(ctx, "n", 10, redisfence.Cmd("SET", key, "v"), redisfence.Cmd("EXPIRE", key, 60), redisfence.Cmd("DEL", key))
			return err
		}, false)
		check("Check alone", "evalsha", func() error { return f.Check(ctx, "n", 11) }, false)
	})
}

// TestFirstUseLoadsScript checks, on a fresh miniredis, that the first
// guarded write loads the script (EVALSHA, then EVAL) and later ones do
// not.
func TestFirstUseLoadsScript(t *testing.T) {
	c := miniredisClients(t)(t)
	log := &commandLog{}
	c.AddHook(hook{process: func(cmd redis.Cmder) {
		log.mu.Lock()
		log.cmds = append(log.cmds, cmd.Name())
		log.mu.Unlock()
	}})
	f, _ := redisfence.New(c, "t")
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	log.take()
	for i, want := range []string{"evalsha eval", "evalsha"} {
		if err := f.Check(context.Background(), "n", 1); err != nil {
			t.Fatal(err)
		}
		if got := log.take(); got != want {
			t.Errorf("Check %d sent %q; want %q", i+1, got, want)
		}
	}
}
