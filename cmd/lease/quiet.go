package main

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// go-redis logs connection failures to stderr on its own, several lines
// per failed command. The command's error says what went wrong once, so
// the lease command keeps stderr to that one line.
func init() {
	redis.SetLogger(discardLogger{})
}

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}
