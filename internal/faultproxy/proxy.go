package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// DialTimeout bounds how long the proxy waits to connect to its target for
// each accepted connection. A client whose target could not be reached is
// reset (it sees ECONNRESET or EOF), and Stats.DialFailures counts it.
const DialTimeout = 10 * time.Second

// relistenTimeout bounds how long Clear tries to listen again on the
// proxy's address after Refuse.
const relistenTimeout = 3 * time.Second

// Proxy forwards TCP connections from Addr to a target address and injects
// faults into them. Create it with Start or StartT; its methods are safe for
// concurrent use.
type Proxy struct {
	target string
	addr   string

	ctx      context.Context // done when Close starts: ends dials and pumps
	cancel   context.CancelFunc
	stopCtx  func() bool // unregisters Start's context.AfterFunc
	closeMu  sync.Mutex  // serialises Close
	closeEnd chan struct{}

	mu      sync.Mutex
	ln      net.Listener // nil while refusing and after Close
	closed  bool
	f       faults
	loss    loss
	lossGen uint64
	changed chan struct{} // closed and replaced whenever f or loss changes
	conns   map[*conn]struct{}

	wg sync.WaitGroup // the accept loop and every connection's goroutines

	accepted, dialFailures, open atomic.Int64
	bytesToServer, bytesToClient atomic.Int64
	roundTrips, lostReplies      atomic.Int64
	clears                       atomic.Uint64 // Clear calls: a loss armed before one is void
}

// faults is the switchable state every delivery consults.
type faults struct {
	stall  Direction
	delay  [2]time.Duration // indexed by toServer, toClient
	refuse bool
}

// loss is an armed LoseReplies or LoseReplyTo.
type loss struct {
	n     int
	match func(request []byte) bool
	then  AfterLoss
}

// Start starts a proxy listening on a free port of 127.0.0.1 that forwards
// every connection to target (host:port). It does not contact target until
// a client connects, so target may be down.
//
// The proxy lives until Close is called or ctx is done, whichever comes
// first; either way it then stops accepting, closes every connection and
// ends its goroutines. Call Close even when ctx ends it, to wait for that.
func Start(ctx context.Context, target string) (*Proxy, error) {
	if target == "" {
		return nil, errors.New("faultproxy: empty target address (want host:port)")
	}
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("faultproxy: target %q is not host:port: %w", target, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target:   target,
		addr:     ln.Addr().String(),
		ctx:      pctx,
		cancel:   cancel,
		closeEnd: make(chan struct{}),
		ln:       ln,
		changed:  make(chan struct{}),
		conns:    make(map[*conn]struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop(ln)
	// Holding closeMu keeps a Close that ctx starts at once from reading
	// stopCtx before it is set.
	p.closeMu.Lock()
	p.stopCtx = context.AfterFunc(ctx, p.Close)
	p.closeMu.Unlock()
	return p, nil
}

// TB is the part of testing.TB that StartT uses; *testing.T and
// *testing.B satisfy it.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// StartT starts a proxy to target as Start does, closes it when the test
// ends (t.Cleanup), and fails the test if it cannot start.
func StartT(t TB, target string) *Proxy {
	t.Helper()
	p, err := Start(context.Background(), target)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// Addr returns the address clients dial instead of the target,
// "127.0.0.1:port". It stays the same for the proxy's life, across Refuse
// and Clear.
func (p *Proxy) Addr() string { return p.addr }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Close stops accepting, closes every connection (without RST), and waits
// until every goroutine of the proxy has ended. It is safe to call more
// than once and from several goroutines; each call returns when the proxy
// is fully stopped.
func (p *Proxy) Close() {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	select {
	case <-p.closeEnd:
		return
	default:
	}
	p.stopCtx()
	p.mu.Lock()
	p.closed = true
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	conns := p.connList()
	p.broadcast()
	p.mu.Unlock()
	p.cancel()
	for _, c := range conns {
		c.teardown(false)
	}
	p.wg.Wait()
	close(p.closeEnd)
}

// acceptLoop accepts connections on ln until ln is closed (by Close or
// Refuse).
func (p *Proxy) acceptLoop(ln net.Listener) {
	defer p.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient failure (too many open files, an aborted
			// handshake): wait a little, unless the proxy is stopping.
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		p.handle(nc.(*net.TCPConn))
	}
}

// handle starts forwarding a newly accepted client connection.
func (p *Proxy) handle(client *net.TCPConn) {
	p.mu.Lock()
	if p.closed || p.f.refuse {
		p.mu.Unlock()
		abort(client)
		return
	}
	c := newConn(p, client)
	p.conns[c] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	p.accepted.Add(1)
	p.open.Add(1)
	go c.run()
}

// forget removes a finished connection.
func (p *Proxy) forget(c *conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	p.open.Add(-1)
}

// connList returns the open connections. p.mu must be held.
func (p *Proxy) connList() []*conn {
	cs := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	return cs
}

// broadcast wakes every delivery waiting on the fault state. p.mu must be
// held.
func (p *Proxy) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// snapshot returns the current faults and a channel closed at their next
// change.
func (p *Proxy) snapshot() (faults, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.f, p.changed
}

// abort closes c with an RST instead of a FIN.
func abort(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}
