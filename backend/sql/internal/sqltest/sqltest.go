// Package sqltest holds what the SQL backend's tests share: TCP servers
// for fault tests that need no real database behind them (one that
// accepts connections and never answers, one that hangs up at once;
// faults between a client and a real server come from
// internal/faultproxy), and CycleThroughURL, a tenure taken through a
// Locker opened by URL. Everything they start ends when the test does.
package sqltest

import (
	"io"
	"net"
	"sync"
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
