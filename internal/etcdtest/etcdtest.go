// Package etcdtest gives this module's tests a real etcd server: an
// embedded one (go.etcd.io/etcd/server/v3/embed) on loopback, or, when
// LEASE_TEST_ETCD names one, an external server.
//
// The embedded server listens on 127.0.0.1 on free ports, keeps its data
// in a temporary directory, logs nothing, and runs with a 10ms heartbeat
// and a 100ms election timeout, so it is ready in well under a second and
// grants leases as short as 1s (etcd's minimum lease TTL is 1.5 election
// timeouts, rounded up to whole seconds). It skips fsync, since its data
// is thrown away when it stops, and hashes passwords cheaply.
//
// Only tests import this package (it is internal, and importing the etcd
// server is heavy), so programs that use backend/etcd never compile the
// server.
package etcdtest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Env is the environment variable naming an external etcd to test against
// instead of an embedded server: comma-separated endpoints such as
// "127.0.0.1:2379" or "http://10.0.0.1:2379,10.0.0.2:2379" (plain HTTP
// only).
const Env = "LEASE_TEST_ETCD"

// External returns the endpoints in LEASE_TEST_ETCD as host:port, without
// any "http://", or nil when it is unset or empty.
func External() []string {
	v := strings.TrimSpace(os.Getenv(Env))
	if v == "" {
		return nil
	}
	var eps []string
	for _, ep := range strings.Split(v, ",") {
		ep = strings.TrimPrefix(strings.TrimSpace(ep), "http://")
		if ep = strings.TrimSuffix(ep, "/"); ep != "" {
			eps = append(eps, ep)
		}
	}
	return eps
}

// Endpoints returns the client endpoints, as host:port (ready for an
// etcd:// URL or clientv3.Config.Endpoints), of an etcd server for t: the external one in LEASE_TEST_ETCD when it is set, else
// a new embedded server that is stopped, and its data removed, when t
// ends. It fails t if the embedded server does not start.
//
// Tests that share an external server must keep their keys apart, e.g.
// with a random key prefix per test.
func Endpoints(t testing.TB) []string {
	t.Helper()
	if eps := External(); eps != nil {
		return eps
	}
	s, err := Start()
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(s.Close)
	return s.Endpoints()
}

// Server is a running embedded etcd server.
type Server struct {
	etcd      *embed.Etcd
	dir       string
	endpoints []string
}

// startTimeout bounds how long Start waits for the server to be ready.
const startTimeout = 30 * time.Second

// Start starts an embedded single-member etcd server on loopback with a
// temporary data directory, and waits until it serves clients. Close it
// when done. Use it where no testing.TB exists (TestMain); elsewhere use
// Endpoints.
func Start() (*Server, error) {
	var lastErr error
	// Free ports are picked by binding and closing; another process may
	// take one before etcd binds it, so try a few times.
	for range 3 {
		s, err := start()
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start() (*Server, error) {
	dir, err := os.MkdirTemp("", "etcdtest-")
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	ports, err := freePorts(2)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	clientURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])}

	cfg := embed.NewConfig()
	cfg.Name = "etcdtest"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	cfg.UnsafeNoFsync = true
	// Hash passwords with bcrypt's minimum cost (bcrypt.MinCost): tests
	// that enable authentication should not wait seconds, under -race,
	// for each login.
	cfg.BcryptCost = 4
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("embedded etcd failed: %w", err)
	case <-time.After(startTimeout):
		e.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("embedded etcd not ready after %s", startTimeout)
	}
	// ReadyNotify fires before the server has finished setting up its
	// client listener (gRPC server, HTTP gateway, connection multiplexer).
	// Once an HTTP request is answered, all of that is running, so no
	// goroutine of the server starts after Start returns: tests that check
	// for leaked goroutines against a snapshot can rely on it.
	if err := waitServing(clientURL, time.Now().Add(startTimeout)); err != nil {
		e.Close()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &Server{etcd: e, dir: dir, endpoints: []string{clientURL.Host}}, nil
}

// waitServing waits until the server at u answers an HTTP request for its
// version, or until deadline.
func waitServing(u url.URL, deadline time.Time) error {
	u.Path = "/version"
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	defer hc.CloseIdleConnections()
	for {
		resp, err := hc.Get(u.String())
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: %s", u.String(), resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("embedded etcd does not serve clients: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Endpoints returns the server's client endpoints, as host:port.
func (s *Server) Endpoints() []string {
	return append([]string(nil), s.endpoints...)
}

// Close stops the server, waits for its goroutines to end, and removes
// its data directory.
func (s *Server) Close() {
	s.etcd.Close()
	_ = os.RemoveAll(s.dir)
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
