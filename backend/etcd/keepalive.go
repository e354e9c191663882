package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// keeper sends keep-alives for etcd leases on a few long-lived
// LeaseKeepAlive streams per Locker, instead of clientv3's KeepAliveOnce,
// which opens a new stream for every keep-alive. A keep-alive is then one
// small message each way, and any number of them (a batch of renewals)
// go out back to back and come back in about one round trip. etcd answers
// the requests of one stream in order, one at a time, and a keep-alive of
// a lease that has just expired waits there until etcd has revoked it; so
// the keep-alives are spread over kaStreams streams by lease ID, which
// etcd serves in parallel.
//
// A keep-alive is safe to repeat (it only restarts the lease's TTL), so,
// like KeepAliveOnce, a keep-alive whose stream broke is sent again on a
// new stream for as long as its context allows. The stream lives until
// the Locker's Close; it is opened again, by the first keep-alive that
// needs it, after it breaks.
type keeper struct {
	lc   pb.LeaseClient
	life context.Context // ends with the Locker

	mu      sync.Mutex
	streams [kaStreams]*kaStream // nil where none is open
	closed  bool
	wg      sync.WaitGroup // the goroutines of every stream
}

// kaStreams is how many keep-alive streams a Locker opens at most.
const kaStreams = 8

// shard is the stream that carries the keep-alives of id.
func shard(id clientv3.LeaseID) int { return int(uint64(id) % kaStreams) }

// kaStream is one LeaseKeepAlive stream, its sender and its receiver.
type kaStream struct {
	n      int           // its place in keeper.streams
	opened chan struct{} // closed once the stream is open or has failed
	wake   chan struct{} // 1-buffered: requests to send
	cancel context.CancelFunc

	mu      sync.Mutex
	err     error // why the stream ended; nil while it lives
	queue   []*kaReq
	waiting map[int64][]*kaReq // sent, by lease ID, in the order sent
}

// kaReq is one keep-alive: the caller waits on done, then reads ttl (the
// lease's granted TTL, or 0 when etcd has no such lease) or err.
type kaReq struct {
	id   int64
	ctx  context.Context
	done chan struct{}
	ttl  int64
	err  error
}

// kaBackoff is how long a keep-alive waits before it tries a new stream
// after one broke, doubling up to kaMaxBackoff, while its context lasts.
const (
	kaBackoff    = 10 * time.Millisecond
	kaMaxBackoff = 250 * time.Millisecond
)

func newKeeper(client *clientv3.Client, life context.Context) *keeper {
	return &keeper{lc: pb.NewLeaseClient(client.ActiveConnection()), life: life}
}

// keepAlive restarts the TTL of each lease in ids and returns, in order,
// the TTL each was granted, or 0 for a lease etcd does not have (expired
// or revoked). The keep-alives go out together; the call returns once
// every one is answered, or with an error (and no TTLs) when ctx ends or
// the stream fails in a way that trying again cannot mend.
func (k *keeper) keepAlive(ctx context.Context, ids []clientv3.LeaseID) ([]int64, error) {
	return k.start(ctx, ids).wait()
}

// kaCall is a keepAlive under way: start sends the keep-alives, wait
// collects the answers (and sends again what a broken stream lost), so
// that a caller can do something else meanwhile.
type kaCall struct {
	k     *keeper
	ctx   context.Context
	ids   []clientv3.LeaseID
	ttls  []int64
	reqs  []*kaReq
	order []int // reqs[n] is the keep-alive of ids[order[n]]
	err   error // a failure to send
}

// start sends a keep-alive for each lease in ids.
func (k *keeper) start(ctx context.Context, ids []clientv3.LeaseID) *kaCall {
	c := &kaCall{k: k, ctx: ctx, ids: ids, ttls: make([]int64, len(ids))}
	todo := make([]int, len(ids))
	for i := range todo {
		todo[i] = i
	}
	c.send(todo)
	return c
}

// send sends the keep-alives of ids[i] for each i in todo, each on the
// stream of its lease.
func (c *kaCall) send(todo []int) {
	var byShard [kaStreams][]int
	for _, i := range todo {
		byShard[shard(c.ids[i])] = append(byShard[shard(c.ids[i])], i)
	}
	c.reqs, c.order = make([]*kaReq, 0, len(todo)), make([]int, 0, len(todo))
	for n, idx := range byShard {
		if len(idx) == 0 {
			continue
		}
		s, err := c.k.stream(c.ctx, n)
		if err != nil {
			c.err = err
			return
		}
		batch := make([]*kaReq, len(idx))
		for j, i := range idx {
			batch[j] = &kaReq{id: int64(c.ids[i]), ctx: c.ctx, done: make(chan struct{})}
		}
		s.send(batch)
		c.reqs = append(c.reqs, batch...)
		c.order = append(c.order, idx...)
	}
}

// wait returns the TTLs once every keep-alive is answered, sending again
// on a new stream those whose stream broke, while ctx lasts.
func (c *kaCall) wait() ([]int64, error) {
	backoff := kaBackoff
	for {
		if c.err != nil {
			return nil, c.err
		}
		var again []int
		var lastErr error
		for n, r := range c.reqs {
			select {
			case <-r.done:
			case <-c.ctx.Done():
				return nil, c.ctx.Err()
			}
			if r.err != nil {
				again, lastErr = append(again, c.order[n]), r.err
				continue
			}
			c.ttls[c.order[n]] = r.ttl
		}
		if len(again) == 0 {
			return c.ttls, nil
		}
		if !retryable(lastErr) {
			return nil, fmt.Errorf("keep-alive stream: %w", lastErr)
		}
		select {
		case <-time.After(backoff):
		case <-c.ctx.Done():
			return nil, fmt.Errorf("%w (the keep-alive stream broke: %v)", c.ctx.Err(), lastErr)
		}
		backoff = min(2*backoff, kaMaxBackoff)
		c.send(again)
	}
}

// retryable reports whether a keep-alive that failed with err may be sent
// again on a new stream: the stream broke (a lost connection, a member
// without a leader), as clientv3's KeepAliveOnce judges it.
func retryable(err error) bool {
	if errors.Is(err, io.EOF) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Internal, codes.Canceled:
		return true
	}
	return false
}

// stream returns open stream n, opening it if need be, and waits (as long
// as ctx allows) until it is open.
func (k *keeper) stream(ctx context.Context, n int) (*kaStream, error) {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil, errClosed
	}
	s := k.streams[n]
	if s == nil {
		// RequireLeader: a member that loses its leader ends the stream
		// (so the keep-alives go to a member that has one) rather than
		// hold it.
		sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(k.life))
		s = &kaStream{n: n, opened: make(chan struct{}), wake: make(chan struct{}, 1), cancel: cancel, waiting: map[int64][]*kaReq{}}
		k.streams[n] = s
		k.wg.Add(1)
		go k.run(sctx, s)
	}
	k.mu.Unlock()
	select {
	case <-s.opened:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w (waiting for the keep-alive stream to open)", ctx.Err())
	}
	return s, nil
}

// run opens s, sends its requests and receives their answers until the
// stream breaks or the Locker closes.
func (k *keeper) run(ctx context.Context, s *kaStream) {
	defer k.wg.Done()
	stream, err := k.lc.LeaseKeepAlive(ctx, grpc.WaitForReady(true))
	if err != nil {
		k.fail(s, err)
		close(s.opened)
		return
	}
	close(s.opened)
	var wg sync.WaitGroup
	wg.Go(func() { k.sendLoop(ctx, s, stream) })
	for {
		resp, err := stream.Recv()
		if err != nil {
			k.fail(s, err)
			break
		}
		s.mu.Lock()
		var r *kaReq
		if q := s.waiting[resp.ID]; len(q) > 0 {
			r = q[0]
			if len(q) == 1 {
				delete(s.waiting, resp.ID)
			} else {
				s.waiting[resp.ID] = q[1:]
			}
		}
		s.mu.Unlock()
		if r != nil {
			r.ttl = max(resp.TTL, 0)
			close(r.done)
		}
	}
	wg.Wait()
}

// sendLoop sends what is queued on s, in order, skipping keep-alives whose
// caller has gone: a keep-alive sent late, after its Renew gave up, would
// still restart the lease.
func (k *keeper) sendLoop(ctx context.Context, s *kaStream, stream pb.Lease_LeaseKeepAliveClient) {
	for {
		select {
		case <-s.wake:
		case <-ctx.Done():
			return
		}
		for {
			s.mu.Lock()
			if s.err != nil {
				s.mu.Unlock()
				return
			}
			batch := s.queue
			s.queue = nil
			live := batch[:0]
			for _, r := range batch {
				if r.ctx.Err() == nil {
					live = append(live, r)
					s.waiting[r.id] = append(s.waiting[r.id], r)
				}
			}
			s.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			for _, r := range live {
				if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: r.id}); err != nil {
					k.fail(s, err)
					return
				}
			}
		}
	}
}

// send queues reqs on s; if s has failed already, they fail at once.
func (s *kaStream) send(reqs []*kaReq) {
	s.mu.Lock()
	if err := s.err; err != nil {
		s.mu.Unlock()
		for _, r := range reqs {
			r.err = err
			close(r.done)
		}
		return
	}
	s.queue = append(s.queue, reqs...)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// fail ends s with err: every keep-alive waiting on it fails with err, and
// the next one opens a new stream.
func (k *keeper) fail(s *kaStream, err error) {
	k.mu.Lock()
	if k.streams[s.n] == s {
		k.streams[s.n] = nil
	}
	k.mu.Unlock()
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	if err == nil {
		err = io.EOF
	}
	s.err = err
	var failed []*kaReq
	for _, q := range s.waiting {
		failed = append(failed, q...)
	}
	failed = append(failed, s.queue...)
	s.waiting, s.queue = nil, nil
	s.mu.Unlock()
	s.cancel()
	for _, r := range failed {
		r.err = err
		close(r.done)
	}
}

// close ends the streams and waits for their goroutines. The Locker's
// life context must have ended already.
func (k *keeper) close() {
	k.mu.Lock()
	k.closed = true
	streams := k.streams
	k.mu.Unlock()
	for _, s := range streams {
		if s != nil {
			k.fail(s, errClosed)
		}
	}
	k.wg.Wait()
}
