package etcdlease

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/etcdtest"
)

func TestURLConfig(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// TestNewRefusesBadArguments: a nil client and an empty prefix are errors
// matching lease.ErrInvalid that name the problem, never panics.
func TestNewRefusesBadArguments(t *testing.T) {
	t.Parallel()
	if l, err := New(nil); !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "nil client") || l != nil {
		t.Fatalf("New(nil) = %v, %v; want an ErrInvalid naming the nil client", l, err)
	}
	client := newClient(t, testEndpoints, nil)
	if l, err := New(client, WithPrefix("")); !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "WithPrefix") || l != nil {
		t.Fatalf(`New(client, WithPrefix("")) = %v, %v; want an ErrInvalid naming WithPrefix`, l, err)
	}
	if l, err := Open(context.Background(), "etcd://"+testEndpoints[0], WithPrefix("")); !errors.Is(err, lease.ErrInvalid) || l != nil {
		t.Fatalf(`Open(url, WithPrefix("")) = %v, %v; want ErrInvalid`, l, err)
	}
	l, err := Open(context.Background(), "etcd://"+testEndpoints[0]+"?prefix=from-url/", WithPrefix("from-option/"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	if l.Prefix() != "from-option/" {
		t.Fatalf("Open's options apply after the URL's: prefix %q, want %q", l.Prefix(), "from-option/")
	}
}

// TestOpenErrorsHideThePassword (issue 9, defect 3): whatever is wrong
// with the URL, no error of Open or lease.Open contains its password.
func TestOpenErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	const secret = "Hunter2"
	invalid := []string{
		"etcd://user:Hunter2%zz@host:2379",  // a bad escape: the URL does not parse
		"etcd://user:Hunter2@host:port",     // a port that is not a number
		"etcd://user:Hunter2@host:99999",    // a port out of range
		"etcd://user:Hunter2@h:1,h:x",       // a bad port on a later endpoint
		"etcd://user:Hunter2@h:1,,h:2",      // an empty endpoint
		"etcd://user:Hunter2@host",          // no port
		"etcd://user:Hunter2@h:1/some/path", // a path
		"etcd://user:Hunter2@h:1?bogus=1",   // an unknown parameter
		"etcd://user:Hunter2@h:1?dial_timeout=Hunter2",
		"etcd://:Hunter2@h:1", // a password without a user
	}
	for _, u := range invalid {
		for _, o := range openers {
			l, err := o.open(context.Background(), u)
			if err == nil {
				_ = l.Close()
				t.Errorf("%s(%q) succeeded; want ErrInvalid", o.via, u)
				continue
			}
			if !errors.Is(err, lease.ErrInvalid) {
				t.Errorf("%s(%q) = %v; want ErrInvalid", o.via, u, err)
			}
			if strings.Contains(err.Error(), secret) && !strings.Contains(u, "dial_timeout="+secret) {
				t.Errorf("%s(%q): the error shows the password: %v", o.via, u, err)
			}
		}
	}
	u := "etcd://user:Hunter2@" + silentListener(t)
	for _, o := range openers {
		ctx, cancel := context.WithTimeout(context.Background(), callBudget)
		_, err := o.open(ctx, u)
		cancel()
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("%s of a cluster that never answers = %v; want an error without the password", o.via, err)
		}
	}
}

// TestOpenAuthenticates: a URL's user and password are etcd's
// authentication: Open with the right ones works, and a wrong password
// fails Open without appearing in its error.
func TestOpenAuthenticates(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := etcdtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ep := srv.Endpoints()[0]
	admin := newClient(t, srv.Endpoints(), nil)
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "Hunter2-root"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("enable authentication: %v", err)
		}
	}

	// A generous dial_timeout: logging in is slow on a loaded machine.
	l, err := Open(ctx, "etcd://root:Hunter2-root@"+ep+"?dial_timeout=20s")
	if err != nil {
		t.Fatalf("Open with the right password: %v", err)
	}
	held, err := l.Acquire(ctx, "n", "o", time.Minute)
	if err != nil {
		t.Fatalf("Acquire as an authenticated user: %v", err)
	}
	if err := l.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	for _, o := range openers {
		l, err := o.open(ctx, "etcd://root:Hunter2-wrong@"+ep+"?dial_timeout=20s")
		if err == nil {
			_ = l.Close()
			t.Fatalf("%s with a wrong password succeeded", o.via)
		}
		if strings.Contains(err.Error(), "Hunter2") {
			t.Fatalf("%s with a wrong password: the error shows a password: %v", o.via, err)
		}
		t.Logf("%s with a wrong password: %v", o.via, err)
	}
}
