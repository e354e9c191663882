package main

import (
	"context"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// Drivers log connection failures to stderr on their own: go-redis several
// lines per failed command, the MySQL driver "[mysql] packets.go:58
// unexpected EOF" and the like. The command's error says what went wrong
// once, so the lease command keeps stderr to that one line. The binary
// owns the process, so it sets the drivers' global loggers.
func init() {
	redis.SetLogger(discardLogger{})
	_ = mysql.SetLogger(&mysql.NopLogger{})
}

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}
