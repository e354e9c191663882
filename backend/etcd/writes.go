package etcdlease

import (
	"context"
	"errors"
	"sync"

	"github.com/leasekit/lease/internal/batchctx"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// writer coalesces the owner-checked transactions of concurrent calls
// (Acquire, Release, a Renew that moves a tenure to another lease) into
// shared transactions, each call's own transaction nested in one
// transaction without comparisons, so that each keeps its own comparisons
// and its own answer: group commit. A transaction goes out at once when
// fewer than maxWritesInFlight are under way, and otherwise joins the
// next one; a lone call costs one transaction, as before, and a hundred
// at once cost a few raft entries instead of a hundred.
//
// A shared transaction is sent once, like a single one: a lost answer
// fails every call in it with the store's error, never a resent
// transaction's false. Two calls on one key never share a transaction
// (etcd refuses a transaction that writes a key twice); when etcd refuses
// a shared transaction before applying it because one call's lease no
// longer exists, each call is sent again on its own, so that only that
// call fails.
type writer struct {
	s *store

	// batch is the most calls in one shared transaction (maxBatchWrites;
	// tests set 1 to compare with no coalescing).
	batch int

	mu       sync.Mutex
	closed   bool
	inflight int
	queue    []*writeReq
	wg       sync.WaitGroup // the flushes under way
}

const (
	// maxWritesInFlight bounds the shared write transactions under way.
	maxWritesInFlight = 4
	// maxBatchWrites bounds the calls in one shared transaction: well
	// under etcd's default --max-txn-ops of 128 for the nested
	// transactions' operations too.
	maxBatchWrites = 32
)

type writeReq struct {
	ctx  context.Context
	key  string
	op   clientv3.Op // an OpTxn on key
	done chan struct{}
	resp *clientv3.TxnResponse
	err  error
}

// txn commits the transaction If(cmps).Then(then).Else(els) on key,
// shared with concurrent ones. Its response has the shared transaction's
// header (so Header.Revision is the revision of any key it created). It
// returns by the time ctx ends.
func (w *writer) txn(ctx context.Context, key string, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	req := &writeReq{ctx: ctx, key: key, op: clientv3.OpTxn(cmps, then, els), done: make(chan struct{})}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, errClosed
	}
	w.queue = append(w.queue, req)
	if w.inflight < maxWritesInFlight {
		w.inflight++
		w.wg.Add(1)
		go w.flush()
	}
	w.mu.Unlock()
	select {
	case <-req.done:
		return req.resp, req.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// flush sends the queued transactions until the queue is empty. A
// transaction whose caller has gone before it was sent is dropped.
func (w *writer) flush() {
	defer w.wg.Done()
	for {
		w.mu.Lock()
		var batch []*writeReq
		keys := map[string]bool{}
		rest := w.queue[:0]
		for _, req := range w.queue {
			switch {
			case req.ctx.Err() != nil:
			case len(batch) < w.batch && !keys[req.key]:
				keys[req.key] = true
				batch = append(batch, req)
			default:
				rest = append(rest, req)
			}
		}
		clear(w.queue[len(rest):])
		w.queue = rest
		if len(batch) == 0 {
			w.inflight--
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		w.send(batch)
	}
}

// close makes later transactions fail and waits for the flushes under
// way (which the end of the Locker's life context cuts short).
func (w *writer) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.wg.Wait()
}

// send commits batch in one transaction, or each on its own when etcd
// refused the shared one for a lease that one of them names.
func (w *writer) send(batch []*writeReq) {
	ctxs := make([]context.Context, len(batch))
	for i, req := range batch {
		ctxs[i] = req.ctx
	}
	ctx, cancel := batchctx.New(w.s.life, ctxs)
	defer cancel()
	if len(batch) == 1 {
		req := batch[0]
		cmps, then, els := req.op.Txn()
		req.resp, req.err = w.s.client.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
		close(req.done)
		return
	}
	ops := make([]clientv3.Op, len(batch))
	for i, req := range batch {
		ops[i] = req.op
	}
	resp, err := w.s.client.Txn(ctx).Then(ops...).Commit()
	if err != nil && len(batch) > 1 && (isLeaseNotFound(err) || rpctypes.ErrorDesc(err) == rpctypes.ErrDuplicateKey.Error()) {
		// Refused before anything was applied: one at a time.
		var wg sync.WaitGroup
		for _, req := range batch {
			wg.Go(func() { w.send([]*writeReq{req}) })
		}
		wg.Wait()
		return
	}
	for i, req := range batch {
		switch {
		case err != nil:
			req.err = err
		case i >= len(resp.Responses) || resp.Responses[i].GetResponseTxn() == nil:
			req.err = errShortAnswer
		default:
			nested := resp.Responses[i].GetResponseTxn()
			req.resp = (*clientv3.TxnResponse)(&pb.TxnResponse{Header: resp.Header, Succeeded: nested.Succeeded, Responses: nested.Responses})
		}
		close(req.done)
	}
}

// errShortAnswer reports a shared transaction answered without a result
// for one of its transactions.
var errShortAnswer = errors.New("etcd answered a shared transaction without a result for this call's part of it")
