package redisfence_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

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
