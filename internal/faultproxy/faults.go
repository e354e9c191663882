package faultproxy

import (
	"fmt"
	"net"
	"time"
)

// Direction selects which way bytes flow for Stall and Delay.
type Direction uint8

const (
	// ToServer is the client→server direction: requests.
	ToServer Direction = 1 << iota
	// ToClient is the server→client direction: replies.
	ToClient
	// Both is both directions.
	Both = ToServer | ToClient
)

// String returns "to-server", "to-client", "both" or "none".
func (d Direction) String() string {
	switch d & Both {
	case ToServer:
		return "to-server"
	case ToClient:
		return "to-client"
	case Both:
		return "both"
	}
	return "none"
}

// Indexes of the two directions in per-direction arrays.
const (
	toServer = 0
	toClient = 1
)

// bit returns the Direction of a direction index.
func bit(d int) Direction {
	if d == toServer {
		return ToServer
	}
	return ToClient
}

// AfterLoss says what happens to a connection whose reply was lost.
type AfterLoss uint8

const (
	// ThenReset resets the connection (RST to both sides) as soon as the
	// reply is swallowed: the client's pending read fails with ECONNRESET
	// at once, without any byte of the reply. A client that retries on a
	// broken connection sends the request again on a new connection.
	ThenReset AfterLoss = iota
	// ThenStall leaves the connection open and silent in both directions
	// until Reset or Close: the client's read blocks until its own
	// deadline or context ends it, as when a network path dies without
	// an RST. Clear does not revive such a connection (its stream lost
	// bytes), Reset and Close end it.
	ThenStall
)

// String returns "then-reset" or "then-stall".
func (a AfterLoss) String() string {
	if a == ThenStall {
		return "then-stall"
	}
	return "then-reset"
}

// Stall stops forwarding in the directions dir (ToServer, ToClient or
// Both), on open and new connections, until Clear or another Stall call:
// Stall replaces the stalled set, so Stall(ToServer) after Stall(Both)
// resumes replies, and Stall(0) resumes everything. Nothing is dropped and
// no connection is closed: bytes read meanwhile, and any FIN or RST from
// either side, are held and delivered, in order, once the direction
// resumes. Connections accepted during a stall reach the target but get
// no bytes, so a client connects and then waits, exactly as against a
// store that accepts connections and never answers. Stall(Both) is a
// blackhole.
func (p *Proxy) Stall(dir Direction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.f.stall = dir & Both
	p.broadcast()
}

// Delay delivers each chunk going in dir d after the proxy read it, on
// open and new connections, until Clear or another Delay call for that
// direction (d = 0 removes the delay). Chunks keep their order, and a
// chunk already waiting obeys the newest delay, so removing a delay
// flushes what was held back. Delay(Both, d) adds 2d to every round trip.
func (p *Proxy) Delay(dir Direction, d time.Duration) {
	d = max(d, 0)
	p.mu.Lock()
	defer p.mu.Unlock()
	if dir&ToServer != 0 {
		p.f.delay[toServer] = d
	}
	if dir&ToClient != 0 {
		p.f.delay[toClient] = d
	}
	p.broadcast()
}

// LoseReplies arms the proxy to lose the replies to the next n requests,
// on whichever connections they arrive, and then to treat each such
// connection as then says (ThenReset or ThenStall). n <= 0 disarms it, as
// Clear does; a new call replaces the previous one.
//
// A request here is a chunk the client sends after LoseReplies returns.
// The proxy delivers it to the server (so the server applies it), and then
// swallows the next chunk the server sends on that connection: the first
// part of the reply. Under ThenReset the connection is reset right away,
// under ThenStall it goes silent, so in both cases the client sees no byte
// of that reply. To lose exactly the reply to one call, make sure the
// client sends nothing else first (a health-check ping, a pipelined
// command) or use LoseReplyTo. Replies the server sends unprompted
// (notifications, pushes) count as the reply if they come first.
func (p *Proxy) LoseReplies(n int, then AfterLoss) {
	p.armLoss(loss{n: max(n, 0), then: then})
}

// LoseReplyTo is LoseReplies(1, then) for the first request for which
// match returns true, so the reply lost is the one to the request that
// matters (for example, a request containing a script's SHA or a
// statement's text) and not a ping that a pool sends before it.
//
// match sees the bytes the client sent since the server last sent
// anything on that connection (the request so far, up to 64 KiB), each
// time another chunk of it arrives; it runs on the proxy's goroutines, so
// it must be quick and must not call the Proxy. Requests that match
// nothing pass untouched.
func (p *Proxy) LoseReplyTo(match func(request []byte) bool, then AfterLoss) {
	if match == nil {
		panic("faultproxy: LoseReplyTo with a nil match function")
	}
	p.armLoss(loss{n: 1, match: match, then: then})
}

func (p *Proxy) armLoss(l loss) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loss = l
	p.lossGen++
	p.broadcast()
}

// Reset resets every open connection at once: both the client and the
// server side are closed with an RST, so a client's next read or write
// fails with ECONNRESET. Held and delayed bytes are discarded. New
// connections are accepted as usual; call Refuse first to refuse them too.
func (p *Proxy) Reset() {
	p.mu.Lock()
	conns := p.connList()
	p.mu.Unlock()
	for _, c := range conns {
		c.teardown(true)
	}
}

// Refuse stops listening, so that new connections are refused
// (ECONNREFUSED), as by a store that is down, until Clear listens again on
// the same address. Open connections are left as they are: call Reset too
// for a store that went down with them.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.f.refuse {
		return
	}
	p.f.refuse = true
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	p.broadcast()
}

// Clear removes every fault: stalled and delayed bytes are delivered, an
// armed LoseReplies or LoseReplyTo is disarmed (also for a request already
// sent whose reply has not been delivered yet: a reply held by a stall or
// a delay is delivered), and after Refuse the proxy listens
// again on its address. Connections silenced by a lost reply (ThenStall)
// stay silent. Counters are kept.
//
// The error is not nil only when the proxy could not listen on its address
// again after Refuse (another process took the port meanwhile); the proxy
// then goes on refusing connections.
func (p *Proxy) Clear() error {
	p.mu.Lock()
	refused := p.f.refuse && !p.closed
	p.f = faults{refuse: refused}
	p.loss = loss{}
	p.lossGen++
	p.clears.Add(1)
	for c := range p.conns {
		c.doom.Store(0)
	}
	p.broadcast()
	p.mu.Unlock()
	if !refused {
		return nil
	}
	return p.relisten()
}

// relisten listens again on p.addr after Refuse, trying for a bounded time.
func (p *Proxy) relisten() error {
	deadline := time.Now().Add(relistenTimeout)
	for {
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.closed || !p.f.refuse || p.ln != nil {
				// Closed meanwhile, or another Clear won the race.
				_ = ln.Close()
				return nil
			}
			p.ln = ln
			p.f.refuse = false
			p.wg.Add(1)
			go p.acceptLoop(ln)
			p.broadcast()
			return nil
		}
		p.mu.Lock()
		done := p.closed || !p.f.refuse
		p.mu.Unlock()
		if done { // closed, or another Clear listened again
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("faultproxy: listen again on %s after Refuse: %w", p.addr, err)
		}
		select {
		case <-p.ctx.Done():
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}
