package redislease_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// faultProxy is a TCP proxy between a client under test and a Redis
// server that can blackhole the store or lose one reply. It is small and
// local on purpose (internal/faultproxy will replace it): it reads the
// client's side as RESP commands, so it knows which command a reply
// answers, and passes the server's side through as bytes. go-redis sends
// a command on a pooled connection only after reading the previous reply,
// so the first bytes the server sends after a command are its reply.
type faultProxy struct {
	ln       net.Listener
	upstream string

	mu        sync.Mutex
	conns     []net.Conn
	closed    bool
	blackhole bool
	drop      func(args [][]byte) bool // lose the reply to the first command it matches
	dropped   int
	commands  []string // the name of each command the clients sent, in lower case

	wg sync.WaitGroup
}

// startProxy starts a proxy to upstream (host:port); it stops when t ends.
func startProxy(t testing.TB, upstream string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, upstream: upstream}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		p.closed = true
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *faultProxy) Addr() string { return p.ln.Addr().String() }

// Blackhole makes the proxy a store that accepts connections and never
// answers: from now on it forwards nothing either way, and it keeps every
// connection open (no reset, no FIN), as a partitioned network does.
func (p *faultProxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = true
}

// DropReplyOnce arms the proxy to lose the server's reply to the next
// command that match accepts, once the server has run it: the proxy reads
// and discards the reply, then closes both sides of that connection, as a
// connection that breaks after the request went out. An error reply (such
// as NOSCRIPT, answered by go-redis with EVAL) is passed on and the proxy
// stays armed.
func (p *faultProxy) DropReplyOnce(match func(args [][]byte) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop = match
}

// Commands returns the names of the commands the clients have sent so
// far, in lower case, in the order the proxy read them.
func (p *faultProxy) Commands() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.commands...)
}

// Dropped is how many replies the proxy has lost.
func (p *faultProxy) Dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// track records c, to be closed when the test ends, and reports whether
// the store is blackholed.
func (p *faultProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
	}
	p.conns = append(p.conns, c)
	return p.blackhole
}

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.track(client) {
			p.wg.Add(1)
			go func() { // a blackholed store: read and forget
				defer p.wg.Done()
				_, _ = io.Copy(io.Discard, client)
			}()
			continue
		}
		server, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.track(server)
		pc := &proxyConn{p: p, client: client, server: server}
		p.wg.Add(2)
		go pc.requests()
		go pc.replies()
	}
}

// proxyConn is one client connection and its server connection.
type proxyConn struct {
	p              *faultProxy
	client, server net.Conn

	mu       sync.Mutex
	awaiting bool // the reply to a command DropReplyOnce matched is due
}

func (c *proxyConn) close() {
	_ = c.client.Close()
	_ = c.server.Close()
}

// requests forwards the client's commands to the server.
func (c *proxyConn) requests() {
	defer c.p.wg.Done()
	defer c.close()
	r := bufio.NewReader(c.client)
	for {
		raw, args, err := readCommand(r)
		if err != nil {
			return
		}
		c.p.mu.Lock()
		blackhole, drop := c.p.blackhole, c.p.drop
		if len(args) > 0 {
			c.p.commands = append(c.p.commands, strings.ToLower(string(args[0])))
		}
		c.p.mu.Unlock()
		if blackhole {
			continue
		}
		if drop != nil && drop(args) {
			c.mu.Lock()
			c.awaiting = true
			c.mu.Unlock()
		}
		if _, err := c.server.Write(raw); err != nil {
			return
		}
	}
}

// replies forwards the server's bytes to the client, losing the reply
// that DropReplyOnce asked for.
func (c *proxyConn) replies() {
	defer c.p.wg.Done()
	defer c.close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.server.Read(buf)
		if err != nil {
			return
		}
		c.p.mu.Lock()
		blackhole := c.p.blackhole
		c.p.mu.Unlock()
		if blackhole {
			continue
		}
		c.mu.Lock()
		awaiting := c.awaiting
		c.awaiting = false
		c.mu.Unlock()
		if awaiting && buf[0] != '-' {
			c.p.mu.Lock()
			c.p.dropped++
			c.p.drop = nil
			c.p.mu.Unlock()
			return // the deferred close breaks the connection
		}
		if _, err := c.client.Write(buf[:n]); err != nil {
			return
		}
	}
}

// readCommand reads one RESP command (an array of bulk strings, as every
// client sends) and returns its bytes and its arguments.
func readCommand(r *bufio.Reader) (raw []byte, args [][]byte, err error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, nil, err
	}
	raw = append(raw, line...)
	if line[0] != '*' {
		return raw, bytes.Fields(line), nil // an inline command
	}
	n, err := strconv.Atoi(string(bytes.TrimRight(line[1:], "\r\n")))
	if err != nil {
		return nil, nil, fmt.Errorf("bad array header %q", line)
	}
	for i := 0; i < n; i++ {
		head, err := r.ReadBytes('\n')
		if err != nil {
			return nil, nil, err
		}
		if head[0] != '$' {
			return nil, nil, errors.New("command element is not a bulk string")
		}
		size, err := strconv.Atoi(string(bytes.TrimRight(head[1:], "\r\n")))
		if err != nil || size < 0 {
			return nil, nil, fmt.Errorf("bad bulk string header %q", head)
		}
		body := make([]byte, size+2)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, nil, err
		}
		raw = append(append(raw, head...), body...)
		args = append(args, body[:size])
	}
	return raw, args, nil
}
