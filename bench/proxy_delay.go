package main

import (
	"errors"
	"io"
	"net"
	"time"
)

// packet is what one read from a connection returned, stamped with the
// time it is due at the other side; eof marks the sender's half-close.
type packet struct {
	due  time.Time
	data []byte
	eof  bool
}

// delayQueue is how many reads one direction of a connection holds at
// most: a reader that gets this far ahead of its delay waits, as a TCP
// sender waits for its window. Lock traffic never comes near it.
const delayQueue = 1024

// delayPipe is pipe with every chunk held for delay: a reader goroutine
// (this one) stamps each read with its arrival time plus delay and queues
// it; a writer goroutine writes each chunk, in order, when it is due. The
// reader keeps reading while chunks wait, so requests sent back to back
// stay back to back (pipelining is not serialised by the delay), and
// nothing limits the throughput but the queue above. chunk is called just
// before a chunk is delivered. It reports whether src ended cleanly, as
// pipe does; the half-close is delivered when due too.
func delayPipe(dst, src net.Conn, delay time.Duration, chunk func()) bool {
	a, err := newAlarm()
	if err != nil {
		// No timer: forward undelayed rather than not at all; the RTT
		// check shows it.
		return pipe(dst, src, chunk)
	}
	q := make(chan packet, delayQueue)
	writerDone := make(chan bool, 1)
	go func() {
		defer a.Close()
		writerDone <- deliver(dst, src, q, a, chunk)
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		now := time.Now()
		if n > 0 {
			p := packet{due: now.Add(delay), data: append([]byte(nil), buf[:n]...)}
			select {
			case q <- p:
			case ok := <-writerDone:
				return ok
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				select {
				case q <- packet{due: now.Add(delay), eof: true}:
				case ok := <-writerDone:
					return ok
				}
			}
			close(q)
			return <-writerDone
		}
	}
}

// deliver writes q's chunks to dst as they fall due. It reports whether
// it delivered the sender's EOF; on a failure to write, it closes src so
// that the reader stops too.
func deliver(dst, src net.Conn, q <-chan packet, a *alarm, chunk func()) bool {
	for p := range q {
		if err := a.until(p.due); err != nil {
			_ = src.Close()
			return false
		}
		if p.eof {
			closeWrite(dst)
			return true
		}
		chunk()
		if _, err := dst.Write(p.data); err != nil {
			_ = src.Close()
			return false
		}
	}
	// The reader failed: q closed without an EOF.
	return false
}
