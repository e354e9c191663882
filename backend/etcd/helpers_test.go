package etcdlease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// wire counts the requests a client sends, by gRPC method. It can make
// the reply of the next request of a method get "lost" (the server
// applies it, the caller sees an error), or fail the next request of a
// method before it is sent.
type wire struct {
	mu    sync.Mutex
	calls map[string]int
	drop  map[string]int
	fail  map[string]error
	stuck map[string]chan struct{}
}

func newWire() *wire {
	return &wire{calls: map[string]int{}, drop: map[string]int{}, fail: map[string]error{}, stuck: map[string]chan struct{}{}}
}

func (w *wire) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	short := method[strings.LastIndexByte(method, '/')+1:]
	w.mu.Lock()
	w.calls[short]++
	failure := w.fail[short]
	delete(w.fail, short)
	stuck := w.stuck[short]
	w.mu.Unlock()
	if failure != nil {
		return failure
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
	return streamer(ctx, desc, cc, method, opts...)
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
