package etcdlease

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

func TestURLConfig(t *testing.T) {
	good := []struct {
		url       string
		endpoints []string
		prefix    string
		dial      time.Duration
		user      string
		password  string
	}{
		{"etcd://127.0.0.1:2379", []string{"127.0.0.1:2379"}, DefaultPrefix, DefaultDialTimeout, "", ""},
		{"etcd://a:1,b:2,c:3/", []string{"a:1", "b:2", "c:3"}, DefaultPrefix, DefaultDialTimeout, "", ""},
		{"ETCD://h:1?prefix=jobs%2F&dial_timeout=250ms", []string{"h:1"}, "jobs/", 250 * time.Millisecond, "", ""},
		{"etcd://root:s3cret@h:1", []string{"h:1"}, DefaultPrefix, DefaultDialTimeout, "root", "s3cret"},
	}
	for _, g := range good {
		u, err := url.Parse(g.url)
		if err != nil {
			t.Fatal(err)
		}
		cfg, opts, err := config(u)
		if err != nil {
			t.Errorf("config(%q): %v", g.url, err)
			continue
		}
		o, err := newOptions(opts)
		if err != nil {
			t.Errorf("config(%q): options: %v", g.url, err)
			continue
		}
		if !slices.Equal(cfg.Endpoints, g.endpoints) || o.prefix != g.prefix || cfg.DialTimeout != g.dial || cfg.Username != g.user || cfg.Password != g.password {
			t.Errorf("config(%q) = endpoints %q prefix %q dial_timeout %s user %q password %q; want %q %q %s %q %q",
				g.url, cfg.Endpoints, o.prefix, cfg.DialTimeout, cfg.Username, cfg.Password, g.endpoints, g.prefix, g.dial, g.user, g.password)
		}
	}

	bad := []string{
		"etcd://h:1?prefx=a",
		"etcd://h:1?prefix=",
		"etcd://h:1?prefix=a&prefix=b",
		"etcd://h:1?dial_timeout=soon",
		"etcd://h:1?dial_timeout=-1s",
		"etcd://h:1/some/path",
		"etcd://a:1,,b:2",
		"etcd://",
	}
	for _, b := range bad {
		if _, err := Open(context.Background(), b); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Open(%q) = %v; want ErrInvalid", b, err)
		}
	}
}

// TestOpenRegistersTheScheme: lease.Open reaches this package for etcd://
// URLs, and the Locker it opens works and owns its client.
func TestOpenRegistersTheScheme(t *testing.T) {
	ctx := context.Background()
	l, err := lease.Open(ctx, "etcd://"+testEndpoints[0]+"?prefix="+url.QueryEscape(randomPrefix()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	el, ok := l.(*Locker)
	if !ok || el.s.closeClient == nil {
		t.Fatalf("lease.Open returned %T; want an *etcdlease.Locker that owns its client", l)
	}
	if _, err := l.Inspect(ctx, "x"); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("Inspect on a fresh prefix: %v", err)
	}
	if _, err := lease.Open(ctx, "etcd://h:1?bogus=1"); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("lease.Open with an unknown parameter: %v; want ErrInvalid", err)
	}
}
