package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// readSize is the largest chunk the proxy reads at once.
	readSize = 32 << 10
	// queueLen is how many chunks per direction may wait for delivery
	// before the proxy stops reading (and TCP pushes back on the sender).
	queueLen = 64
	// maxTurn caps the request bytes LoseReplyTo's match function sees.
	maxTurn = 64 << 10
)

// Values of conn.last: the direction of the last chunk read.
const (
	lastNone int32 = iota
	lastToServer
	lastToClient
)

// chunk is what one read from one side produced, waiting for delivery to
// the other side.
type chunk struct {
	data []byte
	at   time.Time // when the proxy read it
	eof  bool      // the sender closed its side (FIN): half-close the receiver
	fail bool      // reading failed (RST): reset the connection
	lose bool      // the first chunk of a reply LoseReplies swallows
	then AfterLoss // for lose
	gen  uint64    // for lose: Proxy.clears when the loss was armed
}

// conn is one client connection and the proxy's connection to the target
// for it.
type conn struct {
	p      *Proxy
	client *net.TCPConn
	done   chan struct{} // closed by teardown

	mu     sync.Mutex
	server *net.TCPConn // nil until dialled
	torn   bool

	doom     atomic.Int32  // 0, or 1+AfterLoss: lose the next chunk the server sends
	doomGen  atomic.Uint64 // Proxy.clears when doom was set
	silenced atomic.Bool   // a reply was lost under ThenStall: deliver nothing more
	last     atomic.Int32  // lastNone, lastToServer or lastToClient
	replies  atomic.Uint64 // chunks read from the server so far
	eofs     atomic.Int32  // directions whose FIN was delivered

	// Used only by the goroutine delivering to the server.
	turn        []byte // request bytes since the server last sent anything
	turnReplies uint64 // replies when turn started
}

func newConn(p *Proxy, client *net.TCPConn) *conn {
	return &conn{p: p, client: client, done: make(chan struct{})}
}

// run dials the target and forwards both ways until the connection ends.
func (c *conn) run() {
	defer c.p.wg.Done()
	defer c.p.forget(c)
	d := net.Dialer{Timeout: DialTimeout}
	nc, err := d.DialContext(c.p.ctx, "tcp", c.p.target)
	if err != nil {
		if c.p.ctx.Err() == nil {
			c.p.dialFailures.Add(1)
		}
		c.teardown(true)
		return
	}
	server := nc.(*net.TCPConn)
	c.mu.Lock()
	if c.torn { // Reset or Close while dialling
		c.mu.Unlock()
		abort(server)
		return
	}
	c.server = server
	c.mu.Unlock()

	up := make(chan chunk, queueLen)
	down := make(chan chunk, queueLen)
	var wg sync.WaitGroup
	wg.Add(4)
	go c.read(toServer, c.client, up, &wg)
	go c.write(toServer, server, up, &wg)
	go c.read(toClient, server, down, &wg)
	go c.write(toClient, c.client, down, &wg)
	wg.Wait()
	c.teardown(false)
}

// teardown closes both sides once, with an RST when rst is set, and wakes
// every goroutine of the connection.
func (c *conn) teardown(rst bool) {
	c.mu.Lock()
	if c.torn {
		c.mu.Unlock()
		return
	}
	c.torn = true
	server := c.server
	c.mu.Unlock()
	close(c.done)
	for _, s := range []*net.TCPConn{c.client, server} {
		if s == nil {
			continue
		}
		if rst {
			abort(s)
		} else {
			_ = s.Close()
		}
	}
}

// read reads chunks from src and queues them for the other side, counting
// turns and marking the reply that LoseReplies dooms.
func (c *conn) read(d int, src *net.TCPConn, q chan<- chunk, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := make([]byte, readSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			ch := chunk{data: bytes.Clone(buf[:n]), at: time.Now()}
			if d == toServer {
				if c.last.Swap(lastToServer) != lastToServer {
					c.p.roundTrips.Add(1)
				}
			} else {
				c.last.Store(lastToClient)
				c.replies.Add(1)
				if v := c.doom.Swap(0); v != 0 {
					ch.lose, ch.then, ch.gen = true, AfterLoss(v-1), c.doomGen.Load()
				}
			}
			if !c.queue(q, ch) {
				return
			}
		}
		if err != nil {
			eof := errors.Is(err, io.EOF)
			c.queue(q, chunk{at: time.Now(), eof: eof, fail: !eof})
			return
		}
	}
}

// queue hands ch to the delivering goroutine, or reports false when the
// connection is torn down.
func (c *conn) queue(q chan<- chunk, ch chunk) bool {
	select {
	case q <- ch:
		return true
	case <-c.done:
		return false
	}
}

// write delivers queued chunks to dst, applying the proxy's faults.
func (c *conn) write(d int, dst *net.TCPConn, q <-chan chunk, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		var ch chunk
		select {
		case ch = <-q:
		case <-c.done:
			return
		}
		if !c.hold(d, ch.at) {
			return
		}
		switch {
		case ch.lose && ch.gen == c.p.clears.Load():
			c.p.lostReplies.Add(1)
			if ch.then == ThenStall {
				c.silenced.Store(true)
				continue
			}
			c.teardown(true)
			return
		case ch.fail:
			c.teardown(true)
			return
		case ch.eof:
			_ = dst.CloseWrite()
			if c.eofs.Add(1) == 2 {
				c.teardown(false)
			}
			return
		}
		if d == toServer {
			c.armLoss(ch.data)
		}
		if _, err := dst.Write(ch.data); err != nil {
			c.teardown(true)
			return
		}
		if d == toServer {
			c.p.bytesToServer.Add(int64(len(ch.data)))
		} else {
			c.p.bytesToClient.Add(int64(len(ch.data)))
		}
	}
}

// hold waits until a chunk read at time at may be delivered in direction
// d: the direction is not stalled, the connection is not silenced, and the
// delay has passed. It reports false when the connection is torn down.
func (c *conn) hold(d int, at time.Time) bool {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		f, changed := c.p.snapshot()
		if c.silenced.Load() || f.stall&bit(d) != 0 {
			select {
			case <-changed:
				continue
			case <-c.done:
				return false
			}
		}
		wait := time.Until(at.Add(f.delay[d]))
		if wait <= 0 {
			select {
			case <-c.done:
				return false
			default:
				return true
			}
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-timer.C:
		case <-changed:
		case <-c.done:
			return false
		}
	}
}

// armLoss runs before a request chunk is delivered to the server: when
// LoseReplies or LoseReplyTo is armed (and its match accepts the request),
// it dooms the next chunk the server sends on this connection. The doom is
// set before the request is written, so the reply cannot slip through
// between the write and the mark.
func (c *conn) armLoss(data []byte) {
	p := c.p
	p.mu.Lock()
	l, gen := p.loss, p.lossGen
	p.mu.Unlock()
	if l.n == 0 || c.doom.Load() != 0 {
		return
	}
	if l.match != nil {
		if r := c.replies.Load(); r != c.turnReplies || len(c.turn) == 0 {
			c.turn, c.turnReplies = c.turn[:0], r
		}
		if room := maxTurn - len(c.turn); room > 0 {
			c.turn = append(c.turn, data[:min(len(data), room)]...)
		}
		if !l.match(c.turn) {
			return
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lossGen != gen || p.loss.n == 0 {
		return // disarmed or re-armed meanwhile
	}
	p.loss.n--
	c.doomGen.Store(p.clears.Load())
	c.doom.Store(int32(l.then) + 1)
}
