// Package sqltest holds TCP servers for the SQL backend's fault tests: one
// that accepts connections and never answers, one that hangs up at once,
// and a proxy that can lose every reply while keeping connections open.
// Everything they start ends when the test does.
package sqltest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Silent starts a server that accepts connections, reads what it is sent
// and never writes a byte: a database that does not answer. It returns
// the server's address.
func Silent(t testing.TB) string {
	t.Helper()
	return serve(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
}

// HangUp starts a server that closes every connection as soon as it has
// accepted it, and returns its address.
func HangUp(t testing.TB) string {
	t.Helper()
	return serve(t, func(net.Conn) {})
}

// serve accepts connections and runs handle on each, then closes it.
// When t ends it closes the listener and every open connection and waits
// for its goroutines.
func serve(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// Proxy forwards TCP connections to a server. While DropReplies is on, it
// still forwards what clients send but drops what the server answers,
// keeping the connections open: a statement reaches the database, and its
// reply is lost.
type Proxy struct {
	addr string
	drop atomic.Bool
}

// NewProxy starts a proxy to target and returns it.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{}
	p.addr = serve(t, func(client net.Conn) {
		server, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		defer server.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.copyReplies(client, server)
			client.Close()
		}()
		_, _ = io.Copy(server, client)
		server.Close()
		<-done
	})
	return p
}

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.addr }

// DropReplies turns dropping the server's replies on or off.
func (p *Proxy) DropReplies(on bool) { p.drop.Store(on) }

func (p *Proxy) copyReplies(client, server net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && !p.drop.Load() {
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
