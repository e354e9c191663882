package redislease_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
	"github.com/leasekit/lease/internal/testenv"
)

func TestSchemesRegistered(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"redis", "rediss"} {
		if !slices.Contains(lease.Schemes(), s) {
			t.Errorf("scheme %q is not registered: %v", s, lease.Schemes())
		}
	}
}

func TestOpenUsesURLOptions(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	ctx := context.Background()
	l, err := redislease.Open(ctx, "redis://"+mr.Addr()+"/3?prefix=app%3Alease%2F&dial_timeout=2s&max_retries=1&client_name=leasetest")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if l.Prefix() != "app:lease/" {
		t.Fatalf("Prefix() = %q", l.Prefix())
	}
	if _, err := l.Acquire(ctx, "jobs/x", "owner", time.Minute); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	mr.Select(3)
	keys := mr.Keys()
	if len(keys) != 2 || !strings.HasPrefix(keys[0], "app:lease/{") {
		t.Fatalf("keys in db 3: %q; want two under app:lease/", keys)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := l.Inspect(ctx, "jobs/x"); !errors.Is(err, lease.ErrClosed) {
		t.Fatalf("Inspect after Close: %v", err)
	}
}

func TestLeaseOpenRedis(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	ctx := context.Background()
	l, err := lease.Open(ctx, "redis://"+mr.Addr()+"?prefix=x:")
	if err != nil {
		t.Fatalf("lease.Open: %v", err)
	}
	defer l.Close()
	got, err := l.Acquire(ctx, "jobs/x", "owner", time.Minute)
	if err != nil || got.Token == 0 {
		t.Fatalf("Acquire: %v %v", got, err)
	}
}

func TestOpenRefusesBadURLs(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	ctx := context.Background()
	for _, raw := range []string{
		"redis://" + mr.Addr() + "?prefx=x",             // misspelt
		"redis://" + mr.Addr() + "?prefix=a{b}",         // hash tag in prefix
		"redis://" + mr.Addr() + "?prefix=a&prefix=b",   // twice
		"redis://" + mr.Addr() + "?dial_timeout=soon",   // go-redis rejects
		"redis://" + mr.Addr() + "/notanumber",          // database
		"http://" + mr.Addr(),                           // scheme
		"redis://" + mr.Addr() + "?addr=127.0.0.1:6380", // no cluster URLs
	} {
		l, err := redislease.Open(ctx, raw)
		if err == nil {
			l.Close()
			t.Errorf("Open(%q) succeeded", raw)
			continue
		}
		if !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Open(%q): %v; want ErrInvalid", raw, err)
		}
	}
}

func TestOpenRealRedis(t *testing.T) {
	t.Parallel()
	client, raw := realRedis(t, -1)
	prefix := randomPrefix("open")
	deleteKeys(t, client, prefix)
	ctx := context.Background()
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	l, err := lease.Open(ctx, raw+sep+"prefix="+prefix)
	if err != nil {
		t.Fatalf("lease.Open: %v", err)
	}
	defer l.Close()
	got, err := l.Acquire(ctx, "jobs/x", "owner", time.Minute)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if n, err := client.Exists(ctx, client.Keys(ctx, globEscape(prefix)+"*").Val()...).Result(); err != nil || n != 2 {
		t.Fatalf("keys under %q: %d, %v", prefix, n, err)
	}
	if err := l.Release(ctx, got); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// TestOpenErrorsNeverQuoteThePassword opens URLs that fail in every way a
// URL can, each with the password Hunter2, and checks that no error text
// holds it (issue 9, defect 3): url.Parse's own errors quote the input,
// such as `invalid port ":Hunter2" after host` for an unescaped '#'.
func TestOpenErrorsNeverQuoteThePassword(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	ctx := context.Background()
	for _, raw := range []string{
		"redis://:Hunter2#x@host:6379/0",            // '#' in the password: a fragment, then a bad port
		"redis://:Hunter2%zz@host:6379/0",           // a bad escape
		"redis://user:Hunter2%zz@host:6379/0",       // a bad escape after a user name
		"redis://:Hunter2@host:99x/0",               // a bad port
		"redis://:Hunter2@host:99999/0",             // a port out of range
		"redis://u:Hunter2@host:6379/notanumber",    // a bad database
		"redis://u:Hunter2@host:6379/0/1",           // a path that is no database
		"redis://u:Hunter2@host:6379/0?prefx=x",     // a misspelt parameter
		"redis://u:Hunter2@host:6379/0?prefix=a{b}", // a hash tag in the prefix
		"redis://u:Hunter2@host:6379/0?dial_timeout=soon",
		"redis://u:Hunter2@host:6379/0?skip_verify=true", // TLS option without TLS
		"rediss://u:Hunter2@host:6379/0?protocol=9",
		"redis://u:Hunter2@host:6379/0#frag",
		"http://u:Hunter2@host:6379/0",
	} {
		l, err := redislease.Open(ctx, raw)
		if err == nil {
			l.Close()
			t.Errorf("Open(%q) succeeded", raw)
			continue
		}
		if strings.Contains(err.Error(), "Hunter2") || strings.Contains(err.Error(), "%zz") {
			t.Errorf("Open(%q) error quotes the password: %v", raw, err)
		}
		if !errors.Is(err, lease.ErrInvalid) || !strings.HasPrefix(err.Error(), "lease/redis: open: ") {
			t.Errorf("Open(%q): %v; want an error matching ErrInvalid, starting lease/redis: open:", raw, err)
		}
	}

	// A URL that parses but names a server that refuses the connection.
	raw := "redis://u:Hunter2@127.0.0.1:1/0?max_retries=-1"
	for name, open := range map[string]func() error{
		"Open":       func() error { _, err := redislease.Open(ctx, raw); return err },
		"lease.Open": func() error { _, err := lease.Open(ctx, raw); return err },
	} {
		if err := open(); err == nil || strings.Contains(err.Error(), "Hunter2") {
			t.Errorf("%s(%q): %v; want an error without the password", name, raw, err)
		}
	}
}
