package redact_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/leasekit/lease/internal/redact"
)

func TestURLNeverShowsTheSecret(t *testing.T) {
	for raw, keep := range map[string]string{
		"postgres://app:Hunter2@db/app":                                              "postgres://app:xxxxx@db/app",
		"postgres://app:Hunter2%zz@db/app":                                           "postgres://app:xxxxx@db/app",
		"redis://:Hunter2#x@host:6379/0":                                             "redis://:xxxxx@host:6379/0",
		"redis://:Hunter2@host:notaport/0":                                           "redis://:xxxxx@host:notaport/0",
		"mysql://root:Hun/ter2@host:3306/test":                                       "mysql://root:xxxxx@host:3306/test",
		"etcd://u:Hunter2?@h:2379":                                                   "etcd://u:xxxxx@h:2379",
		"postgres://db/app?password=Hunter2&sslmode=off":                             "sslmode=off",
		"postgres://db/app?password=Hunter2%zz&sslmode=off":                          "postgres://db/app?xxxxx",
		"sqlite:///var/lib/lease.db":                                                 "sqlite:///var/lib/lease.db",
		"redis+sentinel://h:26379?master_name=m&sentinel_password=Hunter2":           "master_name=m",
		"redis+sentinel://h:26379?SENTINEL_PASSWORD=Hunter2&sentinel_username=admin": "sentinel_username=admin",
		"x://h?client-secret=Hunter2&auth_token=Hunter2&sslkey=/k.pem":               "sslkey=%2Fk.pem",
	} {
		got := redact.URL(raw)
		if strings.Contains(got, "Hunter2") || strings.Contains(got, "Hun/ter2") {
			t.Errorf("URL(%q) = %q: the secret shows", raw, got)
		}
		if !strings.Contains(got, keep) {
			t.Errorf("URL(%q) = %q, want it to keep %q", raw, got, keep)
		}
	}
}

func TestParseErrorDropsTheURL(t *testing.T) {
	bad := []string{"postgres://app:Hunter2%zz@db/app"} // not a literal argument: staticcheck rejects that
	_, err := url.Parse(bad[0])
	if err == nil {
		t.Fatal("the URL parsed")
	}
	if got := redact.ParseError(err); strings.Contains(got.Error(), "Hunter2") || strings.Contains(got.Error(), "%zz") || got.Error() != "invalid URL escape" {
		t.Fatalf("ParseError = %v", got)
	}
	for _, raw := range []string{"redis://:Hunter2#x@host:6379/0", "redis://:Hunter2@host:x/0", "http://[::1%Hunter2"} {
		_, err := url.Parse(raw)
		if err == nil {
			continue
		}
		if got := redact.ParseError(err).Error(); strings.Contains(got, "Hunter2") {
			t.Errorf("ParseError of %q = %v", raw, got)
		}
	}
}
