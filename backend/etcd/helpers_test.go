package etcdlease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// wire counts the requests a client sends, by gRPC method, and the
// keep-alives it sends on LeaseKeepAlive streams (as "KeepAlive"). It can
// make the reply of the next request of a method get "lost" (the server
// applies it, the caller sees an error), fail the next request of a
// method before it is sent, stall a method, or hold requests back to see
// which ones a call sends before it has any answer (waves), or deliver
// the next request of a method late, after its caller gave up (delayNext).
type wire struct {
	mu    sync.Mutex
	calls map[string]int
	drop  map[string]int
	fail  map[string]error
	stuck map[string]chan struct{}
	late  map[string]*lateRequest
	// dropOn is a key: the reply of the next Txn that names it is lost
	// (see dropTxnOn).
	dropOn string
	// dropCarrying is a number of calls: the reply of the next Txn that
	// carries at least that many is lost (see dropTxnCarrying).
	dropCarrying int

	// While gated is set, requests of those methods wait for release,
	// recorded in held.
	gated   map[string]bool
	held    []string
	release chan struct{}
}

func newWire() *wire {
	return &wire{calls: map[string]int{}, drop: map[string]int{}, fail: map[string]error{}, stuck: map[string]chan struct{}{}}
}

// hold records a request of method and, while method is gated, waits for
// the test to release it (or for ctx to end).
func (w *wire) hold(ctx context.Context, method string) error {
	w.mu.Lock()
	if !w.gated[method] {
		w.mu.Unlock()
		return nil
	}
	w.held = append(w.held, method)
	rel := w.release
	w.mu.Unlock()
	select {
	case <-rel:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

func (w *wire) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	short := method[strings.LastIndexByte(method, '/')+1:]
	w.mu.Lock()
	w.calls[short]++
	failure := w.fail[short]
	delete(w.fail, short)
	stuck := w.stuck[short]
	late := w.late[short]
	delete(w.late, short)
	w.mu.Unlock()
	if failure != nil {
		return failure
	}
	if late != nil {
		late.send = func(ctx context.Context) error {
			fresh := reflect.New(reflect.TypeOf(reply).Elem()).Interface()
			return invoker(ctx, method, req, fresh, cc, opts...)
		}
		close(late.caught)
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	if err := w.hold(ctx, short); err != nil {
		return err
	}
	if stuck != nil {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-stuck:
		}
	}
	err := invoker(ctx, method, req, reply, cc, opts...)
	w.mu.Lock()
	defer w.mu.Unlock()
	if tr, ok := req.(*pb.TxnRequest); ok && err == nil && w.dropOn != "" && txnNames(tr, w.dropOn) {
		w.dropOn = ""
		return status.Error(codes.Unavailable, "test: the reply was lost in the network")
	}
	if tr, ok := req.(*pb.TxnRequest); ok && err == nil && w.dropCarrying > 0 && nestedTxns(tr) >= w.dropCarrying {
		w.dropCarrying = 0
		return status.Error(codes.Unavailable, "test: the reply was lost in the network")
	}
	if n := w.drop[short]; err == nil && n > 0 {
		w.drop[short] = n - 1
		if n == 1 {
			return status.Error(codes.Unavailable, "test: the reply was lost in the network")
		}
	}
	return err
}

func (w *wire) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	short := method[strings.LastIndexByte(method, '/')+1:]
	w.mu.Lock()
	w.calls["stream:"+short]++
	w.mu.Unlock()
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err == nil && short == "Watch" {
		return &watchStream{ClientStream: cs, w: w}, nil
	}
	if err != nil || short != "LeaseKeepAlive" {
		return cs, err
	}
	return &countedStream{ClientStream: cs, w: w}, nil
}

// watchStream counts the messages sent on a Watch stream (as
// "WatchSend"): watch creations, cancellations and progress requests.
type watchStream struct {
	grpc.ClientStream
	w *wire
}

func (s *watchStream) SendMsg(m any) error {
	s.w.mu.Lock()
	s.w.calls["WatchSend"]++
	s.w.mu.Unlock()
	return s.ClientStream.SendMsg(m)
}

// countedStream counts the keep-alives sent on a LeaseKeepAlive stream.
// While they are gated, it lets them go out, and holds back their answers
// until the test releases them: so a call's keep-alives can all go out
// before any is answered, as they do.
type countedStream struct {
	grpc.ClientStream
	w *wire

	mu      sync.Mutex
	answers []chan struct{} // per keep-alive sent, in order: the release its answer waits for
}

func (s *countedStream) SendMsg(m any) error {
	w := s.w
	w.mu.Lock()
	w.calls["KeepAlive"]++
	failure := w.fail["KeepAlive"]
	delete(w.fail, "KeepAlive")
	var rel chan struct{}
	if w.gated["KeepAlive"] {
		w.held = append(w.held, "KeepAlive")
		rel = w.release
	}
	w.mu.Unlock()
	if failure != nil {
		return failure
	}
	s.mu.Lock()
	s.answers = append(s.answers, rel)
	s.mu.Unlock()
	return s.ClientStream.SendMsg(m)
}

func (s *countedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		return err
	}
	s.mu.Lock()
	var rel chan struct{}
	if len(s.answers) > 0 {
		rel = s.answers[0]
		s.answers = s.answers[1:]
	}
	s.mu.Unlock()
	if rel != nil {
		select {
		case <-rel:
		case <-s.Context().Done():
			return status.FromContextError(s.Context().Err()).Err()
		}
	}
	return nil
}

// waves runs op with the requests of the methods in want held back, and
// checks that op sends them in the waves want lists: every request of a
// wave goes out before any of them is answered (held back), and the next
// wave only once they are. Requests of other methods (the background
// grants and revocations) pass. It returns op's error.
func (w *wire) waves(t testing.TB, op func() error, want ...[]string) error {
	t.Helper()
	gated := map[string]bool{}
	for _, wave := range want {
		for _, m := range wave {
			gated[m] = true
		}
	}
	w.mu.Lock()
	w.gated, w.held, w.release = gated, nil, make(chan struct{})
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.gated = nil
		close(w.release)
		w.mu.Unlock()
	}()
	errc := make(chan error, 1)
	go func() { errc <- op() }()
	for i, wave := range want {
		exp := slices.Sorted(slices.Values(wave))
		deadline := time.Now().Add(10 * time.Second)
		for {
			w.mu.Lock()
			got := slices.Sorted(slices.Values(w.held))
			w.mu.Unlock()
			if slices.Equal(got, exp) {
				break
			}
			if len(got) > len(exp) || time.Now().After(deadline) {
				t.Fatalf("wave %d: the call sent %v before any of them was answered; want %v", i+1, got, exp)
			}
			select {
			case err := <-errc:
				t.Fatalf("wave %d: the call returned (%v) after sending %v; want %v", i+1, err, got, exp)
			case <-time.After(time.Millisecond):
			}
		}
		// Nothing more goes out while these wait.
		time.Sleep(20 * time.Millisecond)
		w.mu.Lock()
		if len(w.held) != len(exp) {
			got := slices.Sorted(slices.Values(w.held))
			w.mu.Unlock()
			t.Fatalf("wave %d: the call sent %v before any of them was answered; want %v", i+1, got, exp)
		}
		w.held = nil
		close(w.release)
		w.release = make(chan struct{})
		w.mu.Unlock()
	}
	select {
	case err := <-errc:
		w.mu.Lock()
		extra := w.held
		w.mu.Unlock()
		if len(extra) > 0 {
			t.Fatalf("after %d waves the call also sent %v", len(want), extra)
		}
		return err
	case <-time.After(10 * time.Second):
		w.mu.Lock()
		extra := w.held
		w.mu.Unlock()
		t.Fatalf("the call did not return after %d waves (it also sent %v)", len(want), extra)
		return nil
	}
}

// lateRequest is a request that delayNext keeps from etcd until the test
// delivers it.
type lateRequest struct {
	caught chan struct{} // closed once the request was made
	send   func(context.Context) error
}

// delayNext makes the next request of method reach etcd late: its caller
// waits until its context ends and gets the context's error, as from a
// member stopped with the request in its buffers, and the request is
// applied only when the test calls deliver, after that. deliver fails if
// no request of method was made, and otherwise returns etcd's answer to
// the late request.
func (w *wire) delayNext(method string) (deliver func(context.Context) error) {
	late := &lateRequest{caught: make(chan struct{})}
	w.mu.Lock()
	if w.late == nil {
		w.late = map[string]*lateRequest{}
	}
	w.late[method] = late
	w.mu.Unlock()
	return func(ctx context.Context) error {
		select {
		case <-late.caught:
			return late.send(ctx)
		default:
			return status.Errorf(codes.FailedPrecondition, "test: no %s request was made to deliver late", method)
		}
	}
}

// dropNext makes the reply of the next request of method (e.g. "Txn") get
// lost after the server applied it.
func (w *wire) dropNext(method string) { w.dropNth(method, 1) }

// dropNth makes the reply of the n-th next request of method get lost.
func (w *wire) dropNth(method string, n int) {
	w.mu.Lock()
	w.drop[method] = n
	w.mu.Unlock()
}

// dropTxnOn makes the reply of the next Txn that names key (in a
// comparison or an operation, nested or not) get lost after the server
// applied it.
func (w *wire) dropTxnOn(key string) {
	w.mu.Lock()
	w.dropOn = key
	w.mu.Unlock()
}

// dropTxnCarrying makes the reply of the next Txn that carries at least
// n calls' transactions (the writer's shared Txn, see writes.go) get
// lost after the server applied it.
func (w *wire) dropTxnCarrying(n int) {
	w.mu.Lock()
	w.dropCarrying = n
	w.mu.Unlock()
}

// nestedTxns is the number of transactions nested in r's branches.
func nestedTxns(r *pb.TxnRequest) (n int) {
	for _, op := range append(slices.Clone(r.Success), r.Failure...) {
		if op.GetRequestTxn() != nil {
			n++
		}
	}
	return n
}

// txnNames reports whether the transaction r compares or changes key.
func txnNames(r *pb.TxnRequest, key string) bool {
	for _, c := range r.Compare {
		if string(c.Key) == key {
			return true
		}
	}
	for _, op := range append(slices.Clone(r.Success), r.Failure...) {
		switch {
		case op.GetRequestPut() != nil && string(op.GetRequestPut().Key) == key,
			op.GetRequestRange() != nil && string(op.GetRequestRange().Key) == key,
			op.GetRequestDeleteRange() != nil && string(op.GetRequestDeleteRange().Key) == key,
			op.GetRequestTxn() != nil && txnNames(op.GetRequestTxn(), key):
			return true
		}
	}
	return false
}

// failNext makes the next request of method fail with err, unsent.
func (w *wire) failNext(method string, err error) {
	w.mu.Lock()
	w.fail[method] = err
	w.mu.Unlock()
}

// stall makes every request of method wait, unsent, until its context
// ends (as a store that stopped answering would) or unstall is called.
func (w *wire) stall(method string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stuck[method] == nil {
		w.stuck[method] = make(chan struct{})
	}
}

// unstall sends the stalled requests and ends every stall.
func (w *wire) unstall() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for m, ch := range w.stuck {
		close(ch)
		delete(w.stuck, m)
	}
}

// take returns the requests counted since the last take, as "Method×n"
// sorted by method, and their total.
func (w *wire) take() (string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var parts []string
	total := 0
	for m, n := range w.calls {
		total += n
		parts = append(parts, m+"×"+strconv.Itoa(n))
	}
	sort.Strings(parts)
	w.calls = map[string]int{}
	return strings.Join(parts, " "), total
}

// newClient returns a client of the etcd at endpoints, closed when t ends,
// whose requests go through w (if not nil).
func newClient(t testing.TB, endpoints []string, w *wire) *clientv3.Client {
	t.Helper()
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if w != nil {
		cfg.DialOptions = []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(w.unary),
			grpc.WithChainStreamInterceptor(w.stream),
		}
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// randomPrefix returns a key prefix no other test or run uses, so tests
// can share one etcd server, even an external one.
func randomPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "lease-test-" + hex.EncodeToString(b[:]) + "/"
}

// newLocker returns a Locker on the shared test server with a fresh key
// prefix, and the wire its client's requests go through.
func newLocker(t testing.TB) (*Locker, *wire) {
	t.Helper()
	w := newWire()
	return mustNew(t, newClient(t, testEndpoints, w), WithPrefix(randomPrefix())), w
}

// mustNew returns New(client, opts...), closed when t ends (before
// client, which was made earlier).
func mustNew(t testing.TB, client *clientv3.Client, opts ...Option) *Locker {
	t.Helper()
	l, err := New(client, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

var counter atomic.Uint64

// uniqueName returns a lease name for one test.
func uniqueName(label string) string {
	return label + "-" + strconv.Itoa(int(counter.Add(1)))
}
