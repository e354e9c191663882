package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leasekit/lease"
	_ "github.com/leasekit/lease/backend/memory"
)

func TestOpen(t *testing.T) {
	ctx := context.Background()
	l, err := lease.Open(ctx, "mem://")
	if err != nil {
		t.Fatalf("Open(mem://): %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for url, mention := range map[string]string{
		"etcd://127.0.0.1:2379":    `import _ "github.com/leasekit/lease/backend/etcd"`,
		"nosuch://x":               `unknown backend scheme "nosuch"`,
		"/var/lib/lease.db":        "has no scheme",
		"mem://?prefix=x":          `"prefix"`,
		"mem://host":               "takes no host",
		"postgres://u:secret@h/db": "backend/sql",
	} {
		_, err := lease.Open(ctx, url)
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), mention) {
			t.Errorf("Open(%q) = %v, want ErrInvalid mentioning %s", url, err, mention)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) error shows the password: %v", url, err)
		}
	}
}

func TestOpenNeverShowsAPassword(t *testing.T) {
	for _, raw := range []string{
		"postgres://app:Hunter2%zz@db/app",
		"redis://:Hunter2#x@host:6379/0",
		"redis://:Hunter2@host:notaport/0",
		"mem://u:Hunter2@/?x=%zz",
		"nosuch://u:Hunter2@host",
	} {
		_, err := lease.Open(context.Background(), raw)
		if err == nil {
			t.Errorf("Open(%q) succeeded", raw)
			continue
		}
		if strings.Contains(err.Error(), "Hunter2") {
			t.Errorf("Open(%q) = %v: the password shows", raw, err)
		}
	}
}

func TestOpenExplainsAHostAndPort(t *testing.T) {
	for _, raw := range []string{"127.0.0.1:6379", "localhost:5432", "[::1]:2379"} {
		_, err := lease.Open(context.Background(), raw)
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "redis://"+raw) {
			t.Errorf("Open(%q) = %v, want ErrInvalid showing the URL form", raw, err)
		}
	}
}
