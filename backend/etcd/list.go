package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/leasekit/lease/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// listWorkers bounds the concurrent lease look-ups of one List.
const listWorkers = 16

// List implements driver.Lister. It reads every key under the prefix in
// one request, then each key's lease (up to listWorkers at a time), so it
// costs one round trip plus one per tenure.
func (s *store) List(ctx context.Context, prefix string) ([]driver.Tenure, error) {
	opt := clientv3.WithPrefix()
	if prefix == "" {
		// Every name, and none of the waiters' keys after them.
		opt = clientv3.WithRange(s.prefix + waitSep)
	}
	r, err := s.client.Get(ctx, s.key(prefix), opt)
	if err != nil {
		return nil, err
	}
	// etcd returns keys in byte order, which is name order.
	names := make([]string, len(r.Kvs))
	found := make([]driver.Tenure, len(r.Kvs))
	live := make([]bool, len(r.Kvs))
	errs := make([]error, len(r.Kvs))
	sem := make(chan struct{}, listWorkers)
	var wg sync.WaitGroup
	for i, kv := range r.Kvs {
		name := string(kv.Key[len(s.prefix):])
		names[i] = name
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t, err := s.describe(ctx, name, kv)
			if errors.Is(err, errChanged) {
				found[i], live[i], errs[i] = s.Inspect(ctx, name)
				return
			}
			found[i], live[i], errs[i] = t, err == nil, err
		})
	}
	wg.Wait()
	out := make([]driver.Tenure, 0, len(found))
	for i := range found {
		if errs[i] != nil {
			return nil, fmt.Errorf("%s: %w", driver.Quote(names[i]), errs[i])
		}
		if live[i] {
			out = append(out, found[i])
		}
	}
	return out, nil
}
