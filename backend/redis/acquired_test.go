package redislease_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
)

// clockSlack is how far the server's clock may be behind this process's:
// the test servers run on this machine (miniredis in this process).
const clockSlack = time.Second

// TestAcquiredIsTheTenuresStart checks that Lease.Acquired is the
// server's TIME when the tenure began, kept by Renew, re-entrant Acquire,
// Inspect, List and ForceRelease, and new for a new tenure: on miniredis
// (its TIME follows the wall clock here) and on the real server.
func TestAcquiredIsTheTenuresStart(t *testing.T) {
	t.Parallel()
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		mr := miniredis.RunT(t)
		c := newClient(t, mr.Addr())
		checkAcquired(t, c, "")
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		c, _ := realRedis(t, -1)
		prefix := randomPrefix("acquired")
		deleteKeys(t, c, prefix)
		checkAcquired(t, c, prefix)
	})
}

func checkAcquired(t *testing.T, c *redis.Client, prefix string) {
	var opts []redislease.Option
	if prefix != "" {
		opts = append(opts, redislease.WithPrefix(prefix))
	}
	l := mustNew(t, c, opts...)
	defer l.Close()
	ctx := context.Background()
	const ttl = time.Minute
	name := "acquired"

	within := func(owner string) lease.Lease {
		t.Helper()
		start := time.Now()
		got, err := l.Acquire(ctx, name, owner, ttl)
		if err != nil {
			t.Fatal(err)
		}
		end := time.Now()
		if got.Acquired.IsZero() {
			t.Fatalf("Acquire returned %v with a zero Acquired", got)
		}
		if got.Acquired.Before(start.Add(-clockSlack)) || got.Acquired.After(end) {
			t.Fatalf("Acquired %s is outside [%s - %s, %s]: the request's start and its return",
				got.Acquired.Format(time.RFC3339Nano), start.Format(time.RFC3339Nano), clockSlack, end.Format(time.RFC3339Nano))
		}
		return got
	}
	same := func(what string, got, want lease.Lease) {
		t.Helper()
		if !got.Acquired.Equal(want.Acquired) {
			t.Errorf("%s: Acquired %s, want the tenure's %s", what, got.Acquired.Format(time.RFC3339Nano), want.Acquired.Format(time.RFC3339Nano))
		}
	}

	first := within("a")
	time.Sleep(2 * time.Millisecond) // so that a changed start would show
	renewed, err := l.Renew(ctx, first, ttl)
	if err != nil {
		t.Fatal(err)
	}
	same("Renew", renewed, first)
	bare := renewed
	bare.Acquired = time.Time{}
	renewed, err = l.Renew(ctx, bare, ttl)
	if err != nil {
		t.Fatal(err)
	}
	same("Renew of a Lease without Acquired (the store's)", renewed, first)
	again, err := l.Acquire(ctx, name, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	same("re-entrant Acquire", again, first)
	seen, err := l.Inspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	same("Inspect", seen, first)
	listed, err := l.List(ctx, name)
	if err != nil || len(listed) != 1 {
		t.Fatalf("List: %v, %v; want the one tenure", listed, err)
	}
	same("List", listed[0], first)

	if err := l.Release(ctx, again); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	second := within("b")
	if !second.Acquired.After(first.Acquired) {
		t.Errorf("new tenure's Acquired %s is not after the old one's %s", second.Acquired, first.Acquired)
	}
	ended, err := l.ForceRelease(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	same("ForceRelease", ended, second)
}

// TestAcquiredOfOldRecords checks that a lease hash written by a version
// that did not record the tenure's start (no acquired field) still reads,
// with a zero Acquired from every operation, and that the next tenure
// records its start.
func TestAcquiredOfOldRecords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		client func(t *testing.T) (*redis.Client, string)
	}{
		{"miniredis", func(t *testing.T) (*redis.Client, string) {
			return newClient(t, miniredis.RunT(t).Addr()), randomPrefix("old")
		}},
		{"redis", func(t *testing.T) (*redis.Client, string) {
			c, _ := realRedis(t, -1)
			p := randomPrefix("old")
			deleteKeys(t, c, p)
			return c, p
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, prefix := tc.client(t)
			l := mustNew(t, c, redislease.WithPrefix(prefix))
			defer l.Close()
			ctx := context.Background()
			held, err := l.Acquire(ctx, "old", "a", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			// Make it the previous version's record: the same hash
			// without the acquired field.
			keys, err := c.Keys(ctx, globEscape(prefix)+"*:lease").Result()
			if err != nil || len(keys) != 1 {
				t.Fatalf("lease keys under %q: %v, %v; want one", prefix, keys, err)
			}
			if n, err := c.HDel(ctx, keys[0], "acquired").Result(); err != nil || n != 1 {
				t.Fatalf("HDEL acquired: %d, %v; want the field removed", n, err)
			}
			held.Acquired = time.Time{}

			zero := func(what string, ls lease.Lease, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s of an old record: %v", what, err)
				}
				if !ls.Acquired.IsZero() {
					t.Errorf("%s of an old record: Acquired %s, want zero", what, ls.Acquired)
				}
			}
			ls, err := l.Inspect(ctx, "old")
			zero("Inspect", ls, err)
			if ls.Owner != "a" || ls.Token != held.Token {
				t.Errorf("Inspect of an old record: %v, want owner a token %d", ls, held.Token)
			}
			all, err := l.List(ctx, "")
			if err != nil || len(all) != 1 {
				t.Fatalf("List of an old record: %v, %v", all, err)
			}
			zero("List", all[0], nil)
			ls, err = l.Acquire(ctx, "old", "a", time.Minute)
			zero("re-entrant Acquire", ls, err)
			if ls.Token != held.Token {
				t.Errorf("re-entrant Acquire of an old record: token %d, want %d", ls.Token, held.Token)
			}
			held, err = l.Renew(ctx, ls, time.Minute)
			zero("Renew", held, err)
			if err := l.Release(ctx, held); err != nil {
				t.Fatalf("Release of an old record: %v", err)
			}
			next, err := l.Acquire(ctx, "old", "b", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if next.Acquired.IsZero() || next.Token <= held.Token {
				t.Errorf("the tenure after an old record: %v acquired %s, want a start recorded and a larger token", next, next.Acquired)
			}
		})
	}
}
