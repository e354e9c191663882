package main

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// proxy is a TCP proxy on a free loopback port that forwards every
// connection to one target and counts round trips: turns of the
// conversation, that is each time a client starts sending on a connection
// after the server last sent on it (or for the first time). For a
// request/reply protocol whose client waits for each reply (Redis,
// PostgreSQL, MySQL) that is the number of round trips the client waited
// for; requests pipelined without waiting count once.
//
// With a delay (startDelayProxy) it also holds every byte for that long
// in each direction (see delayPipe): the net mode's emulated link.
//
// It is a small copy of the idea behind the main module's
// internal/faultproxy (which another module cannot import), without the
// faults.
type proxy struct {
	ln     net.Listener
	target string
	delay  time.Duration // one way; 0 forwards at once
	turns  atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startProxy listens on 127.0.0.1:0 and forwards to target (host:port).
func startProxy(target string) (*proxy, error) { return startDelayProxy(target, 0) }

// startDelayProxy is startProxy with every byte held for oneWay in each
// direction: a round trip through it takes 2×oneWay more than without.
func startDelayProxy(target string, oneWay time.Duration) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, delay: max(oneWay, 0), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial instead of the target.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

// RoundTrips is the number of turns counted so far.
func (p *proxy) RoundTrips() int64 { return p.turns.Load() }

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines to end.
func (p *proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return
	}
	p.closed = true
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// track registers c, or closes it and reports false once the proxy is
// closed.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(client) {
			return
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

func (p *proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	var d net.Dialer
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	server, err := d.DialContext(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)

	// serverSpoke is true when the server sent something since the client
	// last did (and at the start): the client's next bytes start a turn.
	var serverSpoke atomic.Bool
	serverSpoke.Store(true)
	copyFn := pipe
	if p.delay > 0 {
		copyFn = func(dst, src net.Conn, chunk func()) bool { return delayPipe(dst, src, p.delay, chunk) }
	}
	done := make(chan bool, 2)
	go func() {
		done <- copyFn(server, client, func() {
			if serverSpoke.Swap(false) {
				p.turns.Add(1)
			}
		})
	}()
	go func() {
		done <- copyFn(client, server, func() { serverSpoke.Store(true) })
	}()
	// A side that ends cleanly (EOF, passed on as a half-close) leaves
	// the other direction running until it ends too: replies still on
	// their way (held by a delay) are delivered. A failure ends both.
	if !<-done {
		_ = client.Close()
		_ = server.Close()
	}
	<-done
}

// pipe copies src to dst, calling chunk before each chunk is written. It
// reports whether src ended cleanly (EOF, passed on to dst as a
// half-close) rather than with an error on either side.
func pipe(dst, src net.Conn, chunk func()) bool {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunk()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return false
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				closeWrite(dst)
				return true
			}
			return false
		}
	}
}

// closeWrite passes an EOF on: it half-closes c's sending side.
func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}
