//go:build !lease_noredis

package main

// The redis backend; build with -tags lease_noredis to leave it out.
import _ "github.com/leasekit/lease/backend/redis"
