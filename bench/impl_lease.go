package main

import (
	"context"
	"errors"
	"time"

	"github.com/leasekit/lease"
)

// leaseImpl is lease on l: each handle is one owner.
func leaseImpl(l lease.Locker, ttl time.Duration) impl {
	return impl{
		name:   "lease",
		fenced: true,
		does: map[string]string{
			"cycle": "Acquire + Release (the rtt mode counts their round trips)",
			"renew": "Renew of a held tenure",
			"busy":  "Acquire of a name another owner holds (a *HeldError)",
		},
		open: func(ctx context.Context, name string) (*handle, error) {
			owner := lease.NewOwner()
			var held lease.Lease
			return &handle{
				try: func(ctx context.Context) (int64, bool, error) {
					got, err := l.Acquire(ctx, name, owner, ttl)
					switch {
					case errors.Is(err, lease.ErrHeld):
						return 0, false, nil
					case err != nil:
						return 0, false, err
					}
					held = got
					return int64(got.Token), true, nil
				},
				release: func(ctx context.Context) error { return l.Release(ctx, held) },
				renew: func(ctx context.Context) error {
					got, err := l.Renew(ctx, held, ttl)
					if err == nil {
						held = got
					}
					return err
				},
			}, nil
		},
	}
}
