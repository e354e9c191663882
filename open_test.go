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
		"mysql://root:secret@tcp(127.0.0.1:3306)/test": "host:port in a URL: mysql://user:pass@host:3306/db",
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
		"nosuch://host?sentinel_password=Hunter2&x=%zz",
		"mem://?sentinel_password=Hunter2",
		"app:Hunter2@db:5432",
		"mysql://root:Hunter2@tcp(127.0.0.1:3306)/test",
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

// TestOpenExplainsAHostAndPort: an address given without a scheme is
// refused with an error that shows it as a URL, of the store its port
// names (or of each store when the port names none), and never with
// "unknown backend scheme localhost" or a parse error.
func TestOpenExplainsAHostAndPort(t *testing.T) {
	for raw, want := range map[string][]string{
		"127.0.0.1:6379":               {"redis://127.0.0.1:6379/0"},
		"localhost:5432":               {"postgres://localhost:5432/db"},
		"localhost:5432/app":           {"postgres://localhost:5432/app"},
		"db.internal:3306/app":         {"mysql://db.internal:3306/app"},
		"[::1]:2379":                   {"etcd://[::1]:2379"},
		"10.0.0.7:26379":               {"redis+sentinel://10.0.0.7:26379/0?master_name="},
		"127.0.0.1:6379/2?prefix=x:":   {"redis://127.0.0.1:6379/2?prefix=x:"},
		"app:Hunter2@db:5432/app":      {"postgres://app:xxxxx@db:5432/app"},
		"app:Hun@ter2@db:3306/app":     {"mysql://app:xxxxx@db:3306/app"},
		"db:5432/app?password=Hunter2": {"postgres://db:5432/app?password=xxxxx"},
		"store:1234":                   {"redis://store:1234/0", "postgres://store:1234/db", "mysql://store:1234/db", "etcd://store:1234"},
	} {
		_, err := lease.Open(context.Background(), raw)
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "has no scheme") {
			t.Errorf("Open(%q) = %v, want ErrInvalid saying it has no scheme", raw, err)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Open(%q) = %v, want it to show %s", raw, err, w)
			}
		}
		if strings.Contains(err.Error(), "Hunter2") || strings.Contains(err.Error(), "ter2") {
			t.Errorf("Open(%q) = %v: the password shows", raw, err)
		}
		if strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("Open(%q) = %q: more than one line", raw, err)
		}
	}
	// Not addresses: these keep their own errors.
	for raw, want := range map[string]string{
		"/var/lib/lease.db": "has no scheme (want e.g. sqlite:///",
		"localhost":         "has no scheme (want e.g.",
		"nosuch://h:5432":   `unknown backend scheme "nosuch"`,
	} {
		if _, err := lease.Open(context.Background(), raw); !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want ErrInvalid saying %q", raw, err, want)
		}
	}
}

// TestOpenNamesTheImportOfEveryScheme: each scheme of this module that is
// not registered (only backend/memory is imported here) gets an error
// naming the import that registers it.
func TestOpenNamesTheImportOfEveryScheme(t *testing.T) {
	for raw, pkg := range map[string]string{
		"redis+sentinel://h:26379/0?master_name=m": "backend/redis",
		"rediss+sentinel://h:26379/0":              "backend/redis",
		"redis+cluster://h:7000,h:7001":            "backend/redis",
		"rediss+cluster://h:7000":                  "backend/redis",
		"etcds://h:2379":                           "backend/etcd",
		"postgresql://u:Hunter2@h/db":              "backend/sql/postgres",
	} {
		_, err := lease.Open(context.Background(), raw)
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), `import _ "github.com/leasekit/lease/`+pkg+`"`) {
			t.Errorf("Open(%q) = %v, want ErrInvalid naming %s", raw, err, pkg)
		}
	}
}
