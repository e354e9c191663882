package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// redisImpls are Redis's peers and floor, each on c's client.
func redisImpls(c *storeConn, ttl time.Duration) []impl {
	return []impl{redislockImpl(c, ttl), redsyncImpl(c, ttl), redisFloorImpl(c, ttl)}
}

func redislockImpl(c *storeConn, ttl time.Duration) impl {
	client := redislock.New(c.redis)
	pfx := c.redisPrefix() + "redislock:"
	return impl{
		name: "bsm/redislock",
		does: map[string]string{
			"cycle": "Obtain (EVALSHA: SET NX PX) + Release (EVALSHA: GET, DEL)",
			"renew": "Refresh (EVALSHA: GET, PEXPIRE)",
			"busy":  "Obtain without retry (EVALSHA: SET NX PX fails, GETRANGE)",
		},
		open: func(ctx context.Context, name string) (*handle, error) {
			var lk *redislock.Lock
			return &handle{
				try: func(ctx context.Context) (int64, bool, error) {
					got, err := client.Obtain(ctx, pfx+name, ttl, nil)
					switch {
					case errors.Is(err, redislock.ErrNotObtained):
						return 0, false, nil
					case err != nil:
						return 0, false, err
					}
					lk = got
					return 0, true, nil
				},
				release: func(ctx context.Context) error { return lk.Release(ctx) },
				renew:   func(ctx context.Context) error { return lk.Refresh(ctx, ttl, nil) },
			}, nil
		},
	}
}

func redsyncImpl(c *storeConn, ttl time.Duration) impl {
	rs := redsync.New(goredis.NewPool(c.redis))
	pfx := c.redisPrefix() + "redsync:"
	return impl{
		name: "go-redsync/redsync (one pool)",
		does: map[string]string{
			"cycle": "Lock (SET NX PX, in a goroutine per pool) + Unlock (EVALSHA: GET, DEL)",
			"renew": "Extend (EVALSHA: GET, PEXPIRE)",
			"busy":  "TryLock (SET NX PX fails, then EVALSHA of its delete script: it releases after every failed try)",
		},
		open: func(ctx context.Context, name string) (*handle, error) {
			m := rs.NewMutex(pfx+name, redsync.WithExpiry(ttl), redsync.WithTries(1))
			return &handle{
				try: func(ctx context.Context) (int64, bool, error) {
					err := m.TryLockContext(ctx)
					var taken *redsync.ErrTaken
					switch {
					case errors.As(err, &taken), errors.Is(err, redsync.ErrFailed):
						return 0, false, nil
					case err != nil:
						return 0, false, err
					}
					return 0, true, nil
				},
				release: func(ctx context.Context) error {
					ok, err := m.UnlockContext(ctx)
					if err == nil && !ok {
						err = errors.New("redsync: unlock found the lock gone")
					}
					return err
				},
				renew: func(ctx context.Context) error {
					ok, err := m.ExtendContext(ctx)
					if err == nil && !ok {
						err = errors.New("redsync: extend found the lock gone")
					}
					return err
				},
			}, nil
		},
	}
}

// The raw floor's scripts: owner-checked (the value is unique per tenure).
var (
	floorRelease = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)
	floorRefresh = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) end return 0`)
)

var tenureSeq atomic.Int64

// redisFloorImpl is the least a Redis lock can send: SET NX PX to
// acquire, and owner-checked scripts to release and refresh. It mints no
// fencing token.
func redisFloorImpl(c *storeConn, ttl time.Duration) impl {
	pfx := c.redisPrefix() + "floor:"
	ms := strconv.FormatInt(ttl.Milliseconds(), 10)
	return impl{
		name: "raw floor (SET NX PX + scripts)",
		does: map[string]string{
			"cycle": "SET NX PX + EVALSHA (GET, DEL)",
			"renew": "EVALSHA (GET, PEXPIRE)",
			"busy":  "SET NX PX (fails)",
		},
		open: func(ctx context.Context, name string) (*handle, error) {
			key := pfx + name
			var val string
			return &handle{
				try: func(ctx context.Context) (int64, bool, error) {
					v := fmt.Sprintf("%s#%d", name, tenureSeq.Add(1))
					ok, err := c.redis.SetNX(ctx, key, v, ttl).Result()
					if ok {
						val = v
					}
					return 0, ok, err
				},
				release: func(ctx context.Context) error {
					n, err := floorRelease.Run(ctx, c.redis, []string{key}, val).Int()
					if err == nil && n != 1 {
						err = errors.New("floor: release found the key gone")
					}
					return err
				},
				renew: func(ctx context.Context) error {
					n, err := floorRefresh.Run(ctx, c.redis, []string{key}, val, ms).Int()
					if err == nil && n != 1 {
						err = errors.New("floor: refresh found the key gone")
					}
					return err
				},
			}, nil
		},
	}
}
