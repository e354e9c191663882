package testserver_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// TestMain checks that no helper goroutine (a process reaper, the
// spawner's thread) outlives the servers.
func TestMain(m *testing.M) {
	redis.SetLogger(quiet{}) // failover clients log every master change
	goleak.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
