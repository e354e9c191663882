package faultproxy_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// echoServer echoes every byte back and records what it received, so a
// test can tell whether a request reached the server.
type echoServer struct {
	ln   net.Listener
	wg   sync.WaitGroup
	line bool // echo only whole messages ending in ';'

	mu       sync.Mutex
	received bytes.Buffer
	conns    map[net.Conn]struct{}
}

// startEcho starts an echo server on loopback, stopped when t ends.
func startEcho(t *testing.T) *echoServer { return startEchoServer(t, false) }

// startLineEcho starts an echo server that answers only whole messages
// ending in ';', as a request/reply server answers only whole requests.
func startLineEcho(t *testing.T) *echoServer { return startEchoServer(t, true) }

func startEchoServer(t *testing.T, line bool) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln, line: line, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.close)
	return s
}

func (s *echoServer) addr() string { return s.ln.Addr().String() }

func (s *echoServer) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.echo(c)
	}
}

func (s *echoServer) echo(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	buf := make([]byte, 4096)
	var pending []byte
	for {
		n, err := c.Read(buf)
		if n > 0 {
			s.mu.Lock()
			s.received.Write(buf[:n])
			s.mu.Unlock()
			pending = append(pending, buf[:n]...)
			out := pending
			if s.line {
				out = pending[:bytes.LastIndexByte(pending, ';')+1]
			}
			if _, werr := c.Write(out); werr != nil {
				return
			}
			pending = pending[len(out):]
		}
		if err != nil {
			return
		}
	}
}

// got returns everything the server has received.
func (s *echoServer) got() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received.String()
}

// waitGot waits (up to 5s) until the server has received want in total.
func (s *echoServer) waitGot(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.got() != want {
		if time.Now().After(deadline) {
			t.Fatalf("echo server received %q, want %q", s.got(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *echoServer) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// dial connects to addr, closed when t ends.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes msg and reads it back within 5s.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
	expect(t, c, msg, 5*time.Second)
}

// expect reads exactly want from c within d.
func expect(t *testing.T, c net.Conn, want string, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	buf := make([]byte, len(want))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("read %q: %v (got %q)", want, err, buf)
	}
	if string(buf) != want {
		t.Fatalf("read %q, want %q", buf, want)
	}
}

// expectSilence checks that nothing arrives on c for d.
func expectSilence(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read = %q, %v; want nothing for %s", buf[:n], err, d)
	}
}

// expectReset checks that reading c fails with ECONNRESET within 5s.
func expectReset(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read = %q, %v; want ECONNRESET", buf[:n], err)
	}
}
