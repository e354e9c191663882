package redislease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
	"github.com/leasekit/lease/internal/testenv"
	"github.com/leasekit/lease/internal/testserver"
)

// TestURLFormsOfOtherClients: go-redis's own URL forms for Sentinels and
// Clusters (ParseFailoverURL's master_name and addr=, ParseClusterURL's
// addr=) on a redis:// URL are refused with the form that works, and no
// error of Open or lease.Open shows a password, the Sentinels' included.
func TestURLFormsOfOtherClients(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for raw, want := range map[string]string{
		"redis://u:Hunter2@h1:26379/0?master_name=m&addr=h2:26379":              "addr=",
		"redis://u:Hunter2@h1:7000?addr=h2:7001&addr=h3:7002":                   "redis+cluster://h1:7000,h2:7001",
		"rediss://u:Hunter2@h1:7000?addr=h2:7001":                               "rediss+cluster://",
		"redis://u:Hunter2@h1:26379/0?master_name=m":                            "redis+sentinel://h1:26379,h2:26379/0?master_name=NAME",
		"redis://h1:26379/0?sentinel_password=Hunter2":                          "for Sentinels",
		"redis+sentinel://h1:26379,h2:26379/0?master_name=m&addr=h3:26379":      "separated by commas",
		"redis+sentinel://h1:26379/0?master_name=m&sentinel_password=Hunter2&x": `"x"`,
		"redis+sentinel://:Hunter2@h1:26379/0?sentinel_password=Hunter2":        "master_name",
		"redis+cluster://h1:7000?sentinel_password=Hunter2":                     "Sentinel URLs",
		"rediss+cluster://u:Hunter2@h1:7000,h2:7001?skip_verify=maybe":          "skip_verify",
		"redis+cluster://u:Hunter2@h1:7000,h2:7001?skip_verify=true":            "rediss:// URLs only",
	} {
		l, err := redislease.Open(ctx, raw)
		if l != nil {
			l.Close()
		}
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s) = %v; want ErrInvalid saying %q", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "Hunter2") {
			t.Errorf("Open(%s) = %v: a password shows", raw, err)
		}
		if _, err := lease.Open(ctx, raw); err == nil || strings.Contains(err.Error(), "Hunter2") {
			t.Errorf("lease.Open(%s) = %v; want an error without the password", raw, err)
		}
	}
}

// cycle takes a name through a URL-opened Locker: Acquire, Renew (whose
// tenure must still be the one acquired), Inspect from a second Locker of
// the same URL, Release, and a second Acquire after it.
func cycle(t *testing.T, raw string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	a, err := lease.Open(ctx, raw)
	if err != nil {
		t.Fatalf("lease.Open(%s): %v", raw, err)
	}
	defer a.Close()
	b, err := redislease.Open(ctx, raw)
	if err != nil {
		t.Fatalf("Open(%s): %v", raw, err)
	}
	defer b.Close()
	for i := range 3 {
		name := "url-cycle-" + itoa(i) // on Cluster, hashed to other slots
		held, err := a.Acquire(ctx, name, "a", 10*time.Second)
		if err != nil {
			t.Fatalf("%s: Acquire: %v", raw, err)
		}
		renewed, err := a.Renew(ctx, held, time.Minute)
		if err != nil || renewed.Token != held.Token || !renewed.Expires.After(held.Expires) {
			t.Fatalf("%s: Renew(%v) = %v, %v; want the same tenure, later", raw, held, renewed, err)
		}
		if got, err := b.Inspect(ctx, name); err != nil || got.Token != held.Token || got.Owner != "a" {
			t.Fatalf("%s: Inspect from another Locker = %v, %v; want %v", raw, got, err, renewed)
		}
		if _, err := b.Acquire(ctx, name, "b", time.Minute); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("%s: Acquire while held: %v, want ErrHeld", raw, err)
		}
		if err := a.Release(ctx, renewed); err != nil {
			t.Fatalf("%s: Release: %v", raw, err)
		}
		next, err := b.Acquire(ctx, name, "b", time.Minute)
		if err != nil || next.Token <= held.Token {
			t.Fatalf("%s: Acquire after Release = %v, %v; want a larger token than %d", raw, next, err, held.Token)
		}
		if err := b.Release(ctx, next); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSentinelURLCycle: a Locker opened from a redis+sentinel:// URL
// (with go-redis options and a prefix) takes, renews and releases leases
// on the master the Sentinels name.
func TestSentinelURLCycle(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	s := testserver.StartSentinel(t, nil)
	cycle(t, "redis+sentinel://"+strings.Join(s.SentinelAddrs(), ",")+"/2?master_name="+s.MasterName()+
		"&prefix=url-cycle:&dial_timeout=2s&read_timeout=2s&pool_size=4&client_name=lease-url-test")
}

// TestClusterURLCycle: the same through a redis+cluster:// URL that names
// one node (the client finds the others) and through one that names all.
func TestClusterURLCycle(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	c := testserver.StartRedisCluster(t, nil)
	cycle(t, "redis+cluster://"+c.Addrs()[0]+"?prefix=url-cycle-one:")
	cycle(t, "redis+cluster://"+strings.Join(c.Addrs(), ",")+"?prefix=url-cycle:&dial_timeout=2s&max_retries=5")
}
