package fence_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/fence"
	"github.com/leasekit/lease/fence/fencetest"
)

// storageServer is an HTTP service whose writes are fenced: Middleware
// checks every PUT against a Memory, and the handler's write is itself
// guarded by the same Memory, so check and write are atomic.
type storageServer struct {
	m    fence.Memory
	mu   sync.Mutex
	data map[string]string
	// handled counts requests that reached the PUT handler.
	handled atomic.Int64
}

func newStorageServer(t testing.TB) (*storageServer, *httptest.Server) {
	s := &storageServer{data: map[string]string{}}
	mux := http.NewServeMux()
	mux.Handle("PUT /data/{key}", fence.Middleware(&s.m, http.HandlerFunc(s.put)))
	mux.Handle("POST /check", fence.Middleware(&s.m, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})))
	mux.HandleFunc("GET /data/{key}", s.get)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return s, srv
}

func (s *storageServer) put(w http.ResponseWriter, r *http.Request) {
	s.handled.Add(1)
	name, token, ok := fence.FromContext(r.Context())
	if !ok {
		http.Error(w, "no fence in the request context", http.StatusInternalServerError)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	err = s.m.Guard(r.Context(), name, token, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.data[r.PathValue("key")] = string(body)
		return nil
	})
	var stale *fence.StaleError
	switch {
	case errors.As(err, &stale):
		fence.WriteStale(w, stale)
	case err != nil:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *storageServer) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	v, ok := s.data[r.PathValue("key")]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	_, _ = io.WriteString(w, v)
}

// httpTarget is a client of a storageServer, with its own connections.
type httpTarget struct {
	base   string
	client *http.Client
}

func newHTTPTarget(t testing.TB, base string) httpTarget {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return httpTarget{base: base, client: &http.Client{Transport: &fence.Transport{Base: tr}}}
}

// do sends a fenced request with raw header values, unvalidated, so that
// the server's refusals of bad input are what the suite sees.
func (tg httpTarget) do(ctx context.Context, method, path string, name string, token uint64, body string) error {
	req, err := http.NewRequestWithContext(ctx, method, tg.base+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set(fence.HeaderName, fence.EncodeName(name))
	req.Header.Set(fence.HeaderToken, strconv.FormatUint(token, 10))
	resp, err := tg.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if err := fence.CheckResponse(resp); err != nil {
		return err
	}
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode == http.StatusBadRequest:
		return fmt.Errorf("%w: the server said: %s", lease.ErrInvalid, msg)
	}
	return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, msg)
}

func (tg httpTarget) Check(ctx context.Context, name string, token uint64) error {
	return tg.do(ctx, "POST", "/check", name, token, "")
}

func (tg httpTarget) Write(ctx context.Context, name string, token uint64, key, value string) error {
	return tg.do(ctx, "PUT", "/data/"+url.PathEscape(key), name, token, value)
}

func (tg httpTarget) Read(ctx context.Context, key string) (string, bool, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", tg.base+"/data/"+url.PathEscape(key), nil)
	if err != nil {
		return "", false, err
	}
	resp, err := tg.client.Transport.(*fence.Transport).Base.RoundTrip(req)
	if err != nil {
		return "", false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return "", false, err
	case resp.StatusCode == http.StatusNotFound:
		return "", false, nil
	case resp.StatusCode != http.StatusOK:
		return "", false, fmt.Errorf("GET: %s", resp.Status)
	}
	return string(b), true, nil
}

// TestFencetestHTTP runs the shared cases through HTTP: a client that
// sends the headers, Middleware over a Memory, a handler that guards its
// write with the same Memory.
func TestFencetestHTTP(t *testing.T) {
	_, srv := newStorageServer(t)
	fencetest.Run(t, fencetest.Harness{
		New: func(t testing.TB) fencetest.Target { return newHTTPTarget(t, srv.URL) },
	})
}

// TestMiddlewareAnswers checks each answer of Middleware: status, headers
// and body, and that next is reached only when the token is accepted.
func TestMiddlewareAnswers(t *testing.T) {
	s, srv := newStorageServer(t)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	send := func(header http.Header) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("PUT", srv.URL+"/data/k", strings.NewReader("v"))
		req.Header = header
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	hdr := func(name, token string) http.Header {
		return http.Header{fence.HeaderName: {name}, fence.HeaderToken: {token}}
	}

	resp, _ := send(hdr("report%00x", "20"))
	if resp.StatusCode != http.StatusNoContent || s.handled.Load() != 1 {
		t.Fatalf("accepted token: %s, handler reached %d times", resp.Status, s.handled.Load())
	}
	resp, body := send(hdr("report%00x", "7"))
	if resp.StatusCode != http.StatusConflict || resp.Header.Get(fence.HeaderMax) != "20" {
		t.Fatalf("stale token: %s, %s=%q; want 409 with 20", resp.Status, fence.HeaderMax, resp.Header.Get(fence.HeaderMax))
	}
	if want := `fence: write for "report\x00x" with token 7 refused: token 20 was accepted before`; !strings.Contains(body, want) {
		t.Fatalf("409 body %q lacks %q", body, want)
	}
	if s.handled.Load() != 1 {
		t.Fatal("a stale request reached the handler")
	}
	for _, h := range []http.Header{{}, hdr("report", "x"), hdr("a b", "5"), hdr("report", "0"), {fence.HeaderToken: {"5"}}} {
		resp, body := send(h)
		if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(body, "fence: ") {
			t.Fatalf("headers %v: %s %q; want 400 with a body saying what is wrong", h, resp.Status, body)
		}
	}
	if s.handled.Load() != 1 {
		t.Fatal("a malformed request reached the handler")
	}
}

// TestMiddlewareStoreDown checks that a failing checker gives 503, not
// 409, and that the body does not reveal the store's error.
func TestMiddlewareStoreDown(t *testing.T) {
	down := fence.CheckerFunc(func(context.Context, string, uint64) error {
		return errors.New("dial tcp 10.0.0.7:5432: secret detail")
	})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("PUT", "/x", nil)
	_ = fence.SetHeader(req.Header, "n", 1)
	fence.Middleware(down, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Fatal("next reached although the check failed")
	})).ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || strings.Contains(rec.Body.String(), "secret") {
		t.Fatalf("checker error: %d %q; want 503 without the error's text", rec.Code, rec.Body.String())
	}
}

// TestTransportFromRun checks that the Transport tags requests made with
// the context lease.Run gives fn, and refuses to send untagged ones.
func TestTransportFromRun(t *testing.T) {
	s, srv := newStorageServer(t)
	locker := memory.New()
	defer locker.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: &fence.Transport{Base: base}}
	put := func(ctx context.Context, value string) error {
		req, _ := http.NewRequestWithContext(ctx, "PUT", srv.URL+"/data/report", strings.NewReader(value))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if err := fence.CheckResponse(resp); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("PUT: %s", resp.Status)
		}
		return nil
	}
	ctx := context.Background()
	var first lease.Lease
	err := lease.Run(ctx, locker, "report/2026", time.Minute, func(ctx context.Context) error {
		first, _ = lease.FromContext(ctx)
		return put(ctx, "by the first holder")
	})
	if err != nil {
		t.Fatalf("first Run: %v", err)
	}
	if got := s.m.Max("report/2026"); got != first.Token {
		t.Fatalf("the server's maximum is %d after the first holder's write; want its token %d", got, first.Token)
	}
	err = lease.Run(ctx, locker, "report/2026", time.Minute, func(ctx context.Context) error {
		return put(ctx, "by the second holder")
	})
	if err != nil {
		t.Fatalf("second Run: %v", err)
	}
	// The first holder, its lease long gone, writes with its old token.
	req, _ := http.NewRequest("PUT", srv.URL+"/data/report", strings.NewReader("late"))
	if err := fence.SetHeader(req.Header, first.Name, first.Token); err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	err = fence.CheckResponse(resp)
	var stale *fence.StaleError
	if !errors.As(err, &stale) || stale.Name != first.Name || stale.Token != first.Token || stale.Max <= first.Token {
		t.Fatalf("late write by the first holder: %v; want a StaleError naming its token and a larger one", err)
	}
	if s.data["report"] != "by the second holder" {
		t.Fatalf("the report reads %q", s.data["report"])
	}

	// Outside lease.Run, with no headers: not sent at all.
	n := s.handled.Load()
	if err := put(ctx, "untagged"); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("request without a lease: %v; want ErrInvalid", err)
	}
	if s.handled.Load() != n {
		t.Fatal("an untagged request was sent")
	}
}

// TestTransportLeavesRequestAlone checks the RoundTripper contract: the
// caller's request is not modified.
func TestTransportLeavesRequestAlone(t *testing.T) {
	var got http.Header
	rt := &fence.Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header.Clone()
		return &http.Response{StatusCode: 204, Body: http.NoBody, Request: r}, nil
	})}
	locker := memory.New()
	defer locker.Close()
	err := lease.Run(context.Background(), locker, "a b", time.Minute, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://example.invalid/", nil)
		if _, err := rt.RoundTrip(req); err != nil {
			return err
		}
		if len(req.Header) != 0 {
			return fmt.Errorf("RoundTrip modified the caller's request: %v", req.Header)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Get(fence.HeaderName) != "a%20b" || got.Get(fence.HeaderToken) == "" {
		t.Fatalf("sent headers %v", got)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
