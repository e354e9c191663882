package all_test

import (
	"slices"
	"testing"

	"github.com/leasekit/lease"
	_ "github.com/leasekit/lease/backend/all"
)

func TestEverySchemeIsRegistered(t *testing.T) {
	got := lease.Schemes()
	for _, s := range []string{"mem", "sqlite", "postgres", "postgresql", "mysql", "redis", "rediss", "etcd"} {
		if !slices.Contains(got, s) {
			t.Errorf("scheme %q is not registered (registered: %v)", s, got)
		}
	}
}
