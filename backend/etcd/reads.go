package etcdlease

import (
	"context"
	"errors"
	"sync"

	"github.com/leasekit/lease/internal/batchctx"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxTxnOps is how many reads one read-only transaction carries: etcd's
// default --max-txn-ops. A cluster set lower answers "too many operations
// in txn request", and the reads are split further.
const maxTxnOps = 128

// getMany reads keys (linearizably, writing nothing) in read-only
// transactions of up to maxTxnOps gets, all sent at once: one round trip
// for any number of keys. It returns each key's value (nil when the key
// does not exist) or the error of the transaction that carried it.
func (s *store) getMany(ctx context.Context, keys []string) ([]*mvccpb.KeyValue, []error) {
	kvs := make([]*mvccpb.KeyValue, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for lo := 0; lo < len(keys); lo += maxTxnOps {
		hi := min(lo+maxTxnOps, len(keys))
		wg.Go(func() { s.getChunk(ctx, keys[lo:hi], kvs[lo:hi], errs[lo:hi]) })
	}
	wg.Wait()
	return kvs, errs
}

// getChunk reads keys into kvs in one read-only transaction, or in
// halves if etcd says it carries too many.
func (s *store) getChunk(ctx context.Context, keys []string, kvs []*mvccpb.KeyValue, errs []error) {
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpGet(k)
	}
	r, err := s.client.Txn(ctx).Then(ops...).Commit()
	if errors.Is(err, rpctypes.ErrTooManyOps) && len(keys) > 1 {
		half := len(keys) / 2
		var wg sync.WaitGroup
		wg.Go(func() { s.getChunk(ctx, keys[:half], kvs[:half], errs[:half]) })
		s.getChunk(ctx, keys[half:], kvs[half:], errs[half:])
		wg.Wait()
		return
	}
	if err == nil && len(r.Responses) != len(keys) {
		err = errors.New("etcd answered a transaction of reads with the wrong number of results")
	}
	for i := range keys {
		if err != nil {
			errs[i] = err
			continue
		}
		if got := r.Responses[i].GetResponseRange().GetKvs(); len(got) > 0 {
			kvs[i] = got[0]
		}
	}
}

// reader coalesces the single-key reads of concurrent calls (Renew's
// check, the read of a name last seen busy) into shared read-only
// transactions: a read goes out at once when fewer than maxReadsInFlight
// transactions are under way, and otherwise joins the next one. A lone
// call costs one transaction, as before; many at once cost a few.
type reader struct {
	s   *store
	max int // maxReadsInFlight; tests change it to compare

	mu       sync.Mutex
	closed   bool
	inflight int
	queue    []*readReq
	wg       sync.WaitGroup // the flushes under way
}

// maxReadsInFlight bounds the shared read transactions under way at once.
const maxReadsInFlight = 1

type readReq struct {
	ctx  context.Context
	key  string
	done chan struct{}
	kv   *mvccpb.KeyValue
	err  error
}

// get reads key (linearizably), sharing the transaction with concurrent
// reads, and returns its value, or nil when it does not exist. It returns
// by the time ctx ends.
func (r *reader) get(ctx context.Context, key string) (*mvccpb.KeyValue, error) {
	req := &readReq{ctx: ctx, key: key, done: make(chan struct{})}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errClosed
	}
	r.queue = append(r.queue, req)
	if r.inflight < r.max {
		r.inflight++
		r.wg.Add(1)
		go r.flush()
	}
	r.mu.Unlock()
	select {
	case <-req.done:
		return req.kv, req.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// flush sends the queued reads, maxTxnOps per transaction, until the
// queue is empty. A read whose caller has gone is dropped.
func (r *reader) flush() {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		var batch []*readReq
		for len(r.queue) > 0 && len(batch) < maxTxnOps {
			req := r.queue[0]
			r.queue[0] = nil
			r.queue = r.queue[1:]
			if req.ctx.Err() == nil {
				batch = append(batch, req)
			}
		}
		if len(batch) == 0 {
			r.inflight--
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		ctxs := make([]context.Context, len(batch))
		for i, req := range batch {
			ctxs[i] = req.ctx
		}
		ctx, cancel := batchctx.New(r.s.life, ctxs)
		keys := make([]string, len(batch))
		for i, req := range batch {
			keys[i] = req.key
		}
		kvs := make([]*mvccpb.KeyValue, len(batch))
		errs := make([]error, len(batch))
		r.s.getChunk(ctx, keys, kvs, errs)
		cancel()
		for i, req := range batch {
			req.kv, req.err = kvs[i], errs[i]
			close(req.done)
		}
	}
}

// close makes later reads fail and waits for the flushes under way
// (which the end of the Locker's life context cuts short).
func (r *reader) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait()
}

// errClosed reports a call that raced the Locker's Close.
var errClosed = errors.New("the Locker is closed")
