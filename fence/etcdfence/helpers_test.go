package etcdfence_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/leasekit/lease/fence/etcdfence"
	"github.com/leasekit/lease/fence/fencetest"
)

// randomPrefix returns a key prefix no other test or run uses.
func randomPrefix(label string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "fence-test-" + label + "-" + hex.EncodeToString(b[:]) + "/"
}

// wire counts the gRPC requests a client sends, by method.
type wire struct {
	mu    sync.Mutex
	calls []string
}

func (w *wire) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	w.mu.Lock()
	w.calls = append(w.calls, method[strings.LastIndexByte(method, '/')+1:])
	w.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (w *wire) take() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := strings.Join(w.calls, " ")
	w.calls = nil
	return s
}

// newClient returns a client of endpoints, closed when t ends, whose
// requests go through w (if not nil).
func newClient(t testing.TB, endpoints []string, w *wire) *clientv3.Client {
	t.Helper()
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if w != nil {
		cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(w.unary)}
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// deletePrefix deletes every key under prefix when t ends.
func deletePrefix(t testing.TB, endpoints []string, prefix string) {
	c := newClient(t, endpoints, nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
			t.Errorf("deleting %s: %v", prefix, err)
		}
	})
}

// target is a Fence and the keys it guards, on one client.
type target struct {
	f      *etcdfence.Fence
	c      *clientv3.Client
	prefix string // of the data keys
}

func (tg target) Check(ctx context.Context, name string, token uint64) error {
	return tg.f.Check(ctx, name, token)
}

func (tg target) Write(ctx context.Context, name string, token uint64, key, value string) error {
	_, err := tg.f.Do(ctx, name, token, clientv3.OpPut(tg.prefix+key, value))
	return err
}

func (tg target) Read(ctx context.Context, key string) (string, bool, error) {
	resp, err := tg.c.Get(ctx, tg.prefix+key)
	if err != nil || len(resp.Kvs) == 0 {
		return "", false, err
	}
	return string(resp.Kvs[0].Value), true, nil
}

// harness returns a Harness whose Targets each have their own client of
// *endpoints (read at each call, so a restart may move them).
func harness(t testing.TB, endpoints *[]string) fencetest.Harness {
	prefix := randomPrefix("suite")
	deletePrefix(t, *endpoints, prefix)
	return fencetest.Harness{
		New: func(t testing.TB) fencetest.Target {
			c := newClient(t, *endpoints, nil)
			f, err := etcdfence.New(c, etcdfence.WithPrefix(prefix+"fence/"))
			if err != nil {
				t.Fatal(err)
			}
			return target{f: f, c: c, prefix: prefix + "data/"}
		},
	}
}

// privateEtcd is an embedded etcd server with a data directory of its
// own, which survives a restart.
type privateEtcd struct {
	t   testing.TB
	cfg *embed.Config
	e   *embed.Etcd
}

func startPrivateEtcd(t testing.TB) *privateEtcd {
	t.Helper()
	ports := make([]int, 2)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		defer l.Close()
	}
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])}
	cfg := embed.NewConfig()
	cfg.Name = "private"
	cfg.Dir = t.TempDir()
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	p := &privateEtcd{t: t, cfg: cfg}
	t.Cleanup(p.stop)
	return p
}

func (p *privateEtcd) endpoints() []string { return []string{p.cfg.ListenClientUrls[0].Host} }

func (p *privateEtcd) start() {
	p.t.Helper()
	e, err := embed.StartEtcd(p.cfg)
	if err != nil {
		p.t.Fatalf("starting the private etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		p.t.Fatalf("private etcd failed: %v", err)
	case <-time.After(30 * time.Second):
		e.Close()
		p.t.Fatal("private etcd not ready after 30s")
	}
	p.e = e
}

// restart stops the server and starts it again on its data directory.
func (p *privateEtcd) restart() {
	p.t.Helper()
	p.stop()
	p.start()
}

func (p *privateEtcd) stop() {
	if p.e != nil {
		p.e.Close()
		p.e = nil
	}
}
