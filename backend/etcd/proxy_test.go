package etcdlease

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
)

// HTTP/2 framing, enough to find requests and replies in gRPC traffic
// (RFC 9113 section 4.1).
const (
	h2Preface       = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	h2FrameData     = 0x0
	h2FrameHeaders  = 0x1
	h2FlagEndStream = 0x1
)

type h2Frame struct {
	typ, flags byte
	stream     uint32
	raw        []byte // header and payload, as read
}

func readFrame(r io.Reader) (h2Frame, error) {
	var hdr [9]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return h2Frame{}, err
	}
	n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
	raw := make([]byte, 9+n)
	copy(raw, hdr[:])
	if _, err := io.ReadFull(r, raw[9:]); err != nil {
		return h2Frame{}, err
	}
	return h2Frame{typ: hdr[3], flags: hdr[4], stream: binary.BigEndian.Uint32(hdr[5:9]) & 0x7fffffff, raw: raw}, nil
}

// replyDropper is a TCP proxy to one etcd endpoint that can lose the reply
// to one request, as a network can: it forwards the request to etcd, waits
// for etcd's reply (so the request was applied), and instead of passing
// the reply on, resets the client's connection. gRPC multiplexes every
// call on one HTTP/2 connection, so the proxy reads HTTP/2 frames: the
// request is the next client stream to end (a DATA frame with END_STREAM)
// after dropNextReply, and its reply is the server's first HEADERS or
// DATA frame on that stream.
type replyDropper struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu      sync.Mutex
	armed   bool
	dropped chan struct{}
	conns   map[net.Conn]struct{}
}

func newReplyDropper(t testing.TB, target string) *replyDropper {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &replyDropper{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			_ = c.Close()
		}
		p.conns = nil // later connections are closed at once
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// addr is the proxy's address, to give the client as its endpoint.
func (p *replyDropper) addr() string { return p.ln.Addr().String() }

// dropNextReply makes the proxy lose the reply to the next request, and
// returns a channel closed once it has.
func (p *replyDropper) dropNextReply() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
	p.dropped = make(chan struct{})
	return p.dropped
}

// track records a connection pair for the cleanup to close; false if the
// cleanup already ran.
func (p *replyDropper) track(c ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	for _, c := range c {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *replyDropper) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client, server) {
			_ = client.Close()
			_ = server.Close()
			return
		}
		p.wg.Go(func() { p.serve(client, server) })
	}
}

// serve forwards one connection until either side closes it or the proxy
// drops a reply on it.
func (p *replyDropper) serve(client, server net.Conn) {
	defer func() {
		_ = client.Close()
		_ = server.Close()
	}()
	var victim struct {
		sync.Mutex
		stream  uint32
		dropped chan struct{}
	}
	var wg sync.WaitGroup
	wg.Go(func() { // client to server
		defer func() { _ = server.Close() }()
		preface := make([]byte, len(h2Preface))
		if _, err := io.ReadFull(client, preface); err != nil {
			return
		}
		if _, err := server.Write(preface); err != nil {
			return
		}
		for {
			f, err := readFrame(client)
			if err != nil {
				return
			}
			if f.typ == h2FrameData && f.flags&h2FlagEndStream != 0 {
				p.mu.Lock()
				if p.armed {
					p.armed = false
					victim.Lock()
					victim.stream, victim.dropped = f.stream, p.dropped
					victim.Unlock()
				}
				p.mu.Unlock()
			}
			if _, err := server.Write(f.raw); err != nil {
				return
			}
		}
	})
	// server to client
	for {
		f, err := readFrame(server)
		if err != nil {
			break
		}
		victim.Lock()
		drop := victim.stream != 0 && f.stream == victim.stream && (f.typ == h2FrameHeaders || f.typ == h2FrameData)
		victim.Unlock()
		if drop {
			// The reply exists, so etcd has applied the request: lose it
			// with the connection, as a reset would.
			close(victim.dropped) // before the client can see the reset
			if tc, ok := client.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = client.Close()
			break
		}
		if _, err := client.Write(f.raw); err != nil {
			break
		}
	}
	_ = client.Close()
	_ = server.Close()
	wg.Wait()
}
