package faultproxy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasekit/lease/internal/faultproxy"
	"github.com/leasekit/lease/internal/testenv"
)

// TestForwardsAndCounts: bytes go both ways unchanged, and Stats counts
// connections, bytes and one round trip per request/reply exchange.
func TestForwardsAndCounts(t *testing.T) {
	srv := startEcho(t)
	p := faultproxy.StartT(t, srv.addr())
	if p.Target() != srv.addr() {
		t.Fatalf("Target() = %q, want %q", p.Target(), srv.addr())
	}
	c := dial(t, p.Addr())
	before := p.Stats()
	for i := range 5 {
		roundTrip(t, c, fmt.Sprintf("request %d;", i))
	}
	d := p.Stats().Sub(before)
	if d.RoundTrips != 5 {
		t.Errorf("RoundTrips = %d for 5 exchanges, want 5", d.RoundTrips)
	}
	want := int64(len("request 0;") * 5)
	if d.BytesToServer != want || d.BytesToClient != want {
		t.Errorf("bytes = %d to server, %d to client; want %d each", d.BytesToServer, d.BytesToClient, want)
	}
	s := p.Stats()
	if s.Accepted != 1 || s.Open != 1 || s.DialFailures != 0 || s.LostReplies != 0 {
		t.Errorf("Stats = %+v, want 1 accepted and open, nothing failed or lost", s)
	}

	// A large message crosses in many chunks, intact.
	big := strings.Repeat("0123456789abcdef", 64<<10) // 1 MiB
	errc := make(chan error, 1)
	go func() { _, err := c.Write([]byte(big)); errc <- err }()
	expect(t, c, big, 10*time.Second)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestHalfClosePropagates: a client's FIN reaches the server, and the
// server's FIN reaches the client; then the proxy forgets the connection.
func TestHalfClosePropagates(t *testing.T) {
	srv := startEcho(t)
	p := faultproxy.StartT(t, srv.addr())
	c := dial(t, p.Addr())
	roundTrip(t, c, "x")
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 8)); err != io.EOF {
		t.Fatalf("read after CloseWrite = %d, %v; want EOF from the server's close", n, err)
	}
	waitFor(t, "the connection to be forgotten", func() bool { return p.Stats().Open == 0 })
}

// TestStallHoldsThenDelivers: Stall(Both) forwards nothing on an open or a
// new connection, closes nothing, and Clear delivers what was held.
func TestStallHoldsThenDelivers(t *testing.T) {
	srv := startEcho(t)
	p := faultproxy.StartT(t, srv.addr())
	c := dial(t, p.Addr())
	roundTrip(t, c, "a")

	p.Stall(faultproxy.Both)
	if _, err := c.Write([]byte("b")); err != nil {
		t.Fatal(err)
	}
	c2 := dial(t, p.Addr()) // the kernel accepts; the proxy forwards nothing
	if _, err := c2.Write([]byte("c")); err != nil {
		t.Fatal(err)
	}
	expectSilence(t, c, 300*time.Millisecond)
	expectSilence(t, c2, 100*time.Millisecond)
	if got := srv.got(); got != "a" {
		t.Fatalf("server received %q during the stall, want only %q", got, "a")
	}

	if err := p.Clear(); err != nil {
		t.Fatal(err)
	}
	expect(t, c, "b", 5*time.Second)
	expect(t, c2, "c", 5*time.Second)
	roundTrip(t, c, "d")
}

// TestStallOneDirection: Stall(ToClient) lets requests reach the server
// and holds the replies; Stall(ToServer) holds the requests.
func TestStallOneDirection(t *testing.T) {
	srv := startEcho(t)
	p := faultproxy.StartT(t, srv.addr())
	c := dial(t, p.Addr())

	p.Stall(faultproxy.ToClient)
	if _, err := c.Write([]byte("req")); err != nil {
		t.Fatal(err)
	}
	srv.waitGot(t, "req")
	expectSilence(t, c, 200*time.Millisecond)

	p.Stall(faultproxy.ToServer) // replaces the set: replies flow again
	expect(t, c, "req", 5*time.Second)
	if _, err := c.Write([]byte("two")); err != nil {
		t.Fatal(err)
	}
	expectSilence(t, c, 200*time.Millisecond)
	if got := srv.got(); got != "req" {
		t.Fatalf("server received %q with requests stalled, want %q", got, "req")
	}
	p.Stall(0)
	expect(t, c, "two", 5*time.Second)
}

// TestDelay: each direction's delay adds to the round trip; removing a
// delay flushes what it held back.
func TestDelay(t *testing.T) {
	srv := startEcho(t)
	p := faultproxy.StartT(t, srv.addr())
	c := dial(t, p.Addr())
	roundTrip(t, c, "warm")

	const d = 150 * time.Millisecond
	p.Delay(faultproxy.Both, d)
	start := time.Now()
	roundTrip(t, c, "slow")
	if rtt := time.Since(start); rtt < 2*d {
		t.Errorf("round trip with Delay(Both, %s) took %s, want at least %s", d, rtt, 2*d)
	}

	p.Delay(faultproxy.ToServer, time.Hour)
	p.Delay(faultproxy.ToClient, 0)
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	expectSilence(t, c, 200*time.Millisecond)
	start = time.Now()
	p.Delay(faultproxy.ToServer, 0)
	expect(t, c, "held", 5*time.Second)
	if waited := time.Since(start); waited > 3*time.Second {
		t.Errorf("a held chunk took %s to come once the delay was removed", waited)
	}
}

// TestLoseReplyThenReset: the request reaches the server, the client sees
// ECONNRESET and no byte of the reply, and only one reply is lost.
func TestLoseReplyThenReset(t *testing.T) {
	srv := startEcho(t)
	p := faultproxy.StartT(t, srv.addr())
	c := dial(t, p.Addr())
	roundTrip(t, c, "ping;")

	p.LoseReplies(1, faultproxy.ThenReset)
	if _, err := c.Write([]byte("release;")); err != nil {
		t.Fatal(err)
	}
	expectReset(t, c)
	srv.waitGot(t, "ping;release;")
	if s := p.Stats(); s.LostReplies != 1 {
		t.Errorf("LostReplies = %d, want 1", s.LostReplies)
	}

	c2 := dial(t, p.Addr()) // the loss is spent: a new connection works
	roundTrip(t, c2, "again;")
}

// TestLoseReplyThenStall: the request reaches the server, the client hears
// nothing more on that connection, even after Clear, until Reset.
func TestLoseReplyThenStall(t *testing.T) {
	srv := startEcho(t)
	p := faultproxy.StartT(t, srv.addr())
	c := dial(t, p.Addr())

	p.LoseReplies(1, faultproxy.ThenStall)
	if _, err := c.Write([]byte("one;")); err != nil {
		t.Fatal(err)
	}
	srv.waitGot(t, "one;")
	expectSilence(t, c, 300*time.Millisecond)
	if err := p.Clear(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("two;")); err != nil {
		t.Fatal(err)
	}
	expectSilence(t, c, 200*time.Millisecond)
	if got := srv.got(); got != "one;" {
		t.Errorf("server received %q from a silenced connection, want %q", got, "one;")
	}
	roundTrip(t, dial(t, p.Addr()), "other;")
	p.Reset()
	expectReset(t, c)
}

// TestLoseRepliesCountsRequests: LoseReplies(2, ...) loses the replies to
// the next two requests, on different connections, and no more.
func TestLoseRepliesCountsRequests(t *testing.T) {
	srv := startEcho(t)
	p := faultproxy.StartT(t, srv.addr())
	a, b := dial(t, p.Addr()), dial(t, p.Addr())
	roundTrip(t, a, "a0;")
	roundTrip(t, b, "b0;")
	p.LoseReplies(2, faultproxy.ThenReset)
	if _, err := a.Write([]byte("a1;")); err != nil {
		t.Fatal(err)
	}
	expectReset(t, a)
	if _, err := b.Write([]byte("b1;")); err != nil {
		t.Fatal(err)
	}
	expectReset(t, b)
	roundTrip(t, dial(t, p.Addr()), "c0;")
	if s := p.Stats(); s.LostReplies != 2 {
		t.Errorf("LostReplies = %d, want 2", s.LostReplies)
	}
}

// TestLoseReplyTo: only the reply to the matching request is lost; the
// match sees the whole request even when it arrives in pieces.
func TestLoseReplyTo(t *testing.T) {
	srv := startEcho(t)
	p := faultproxy.StartT(t, srv.addr())
	c := dial(t, p.Addr())
	p.LoseReplyTo(func(req []byte) bool { return bytes.Contains(req, []byte("RELEASE name")) }, faultproxy.ThenReset)
	roundTrip(t, c, "PING;")
	roundTrip(t, c, "GET name;")
	// Two writes with a pause: the proxy reads two chunks of one request.
	if _, err := c.Write([]byte("RELEASE ")); err != nil {
		t.Fatal(err)
	}
	srv.waitGot(t, "PING;GET name;RELEASE ")
	if _, err := c.Write([]byte("name;")); err != nil {
		t.Fatal(err)
	}
	// The echo of "RELEASE " came back before "name;" was sent, so the
	// match sees only "name;" in the new turn: nothing is lost yet.
	expect(t, c, "RELEASE name;", 5*time.Second)
	if _, err := c.Write([]byte("RELEASE name;")); err != nil {
		t.Fatal(err)
	}
	expectReset(t, c)
	srv.waitGot(t, "PING;GET name;RELEASE name;RELEASE name;")
	roundTrip(t, dial(t, p.Addr()), "RELEASE name;") // spent after one
}

// TestLoseReplyToSplitRequest: a request that reaches the proxy in two
// chunks before any reply is matched as a whole.
func TestLoseReplyToSplitRequest(t *testing.T) {
	srv := startLineEcho(t)
	p := faultproxy.StartT(t, srv.addr())
	c := dial(t, p.Addr())
	roundTrip(t, c, "hello;")
	p.LoseReplyTo(func(req []byte) bool { return bytes.Contains(req, []byte("AB;")) }, faultproxy.ThenReset)
	if _, err := c.Write([]byte("A")); err != nil {
		t.Fatal(err)
	}
	srv.waitGot(t, "hello;A") // the server has read it and answered nothing
	if _, err := c.Write([]byte("B;")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if !errors.Is(err, syscall.ECONNRESET) || len(got) != 0 {
		t.Fatalf("read %q, %v; want nothing, then ECONNRESET", got, err)
	}
	srv.waitGot(t, "hello;AB;")
}

// TestClearDisarmsLoss: Clear disarms a loss that has not happened yet.
func TestClearDisarmsLoss(t *testing.T) {
	srv := startEcho(t)
	p := faultproxy.StartT(t, srv.addr())
	c := dial(t, p.Addr())
	p.LoseReplies(3, faultproxy.ThenReset)
	if err := p.Clear(); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, "safe;")
	// A request already sent whose reply is held is disarmed too.
	p.Stall(faultproxy.ToClient)
	p.LoseReplies(1, faultproxy.ThenReset)
	if _, err := c.Write([]byte("held;")); err != nil {
		t.Fatal(err)
	}
	srv.waitGot(t, "safe;held;")
	if err := p.Clear(); err != nil {
		t.Fatal(err)
	}
	expect(t, c, "held;", 5*time.Second)
	roundTrip(t, c, "more;")
}

// TestReset: every open connection sees ECONNRESET; new ones work.
func TestReset(t *testing.T) {
	srv := startEcho(t)
	p := faultproxy.StartT(t, srv.addr())
	a, b := dial(t, p.Addr()), dial(t, p.Addr())
	roundTrip(t, a, "a")
	roundTrip(t, b, "b")
	p.Reset()
	expectReset(t, a)
	expectReset(t, b)
	roundTrip(t, dial(t, p.Addr()), "c")
	waitFor(t, "reset connections to be forgotten", func() bool { return p.Stats().Open == 1 })
}

// TestResetWhileStalled: a stalled connection can be reset.
func TestResetWhileStalled(t *testing.T) {
	srv := startEcho(t)
	p := faultproxy.StartT(t, srv.addr())
	c := dial(t, p.Addr())
	roundTrip(t, c, "accepted") // Reset only sees accepted connections
	p.Stall(faultproxy.Both)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	expectReset(t, c)
}

// TestRefuse: new connections are refused, open ones keep working, and
// Clear listens again on the same address.
func TestRefuse(t *testing.T) {
	srv := startEcho(t)
	p := faultproxy.StartT(t, srv.addr())
	open := dial(t, p.Addr())
	roundTrip(t, open, "accepted") // not in the listener's queue when it closes
	p.Refuse()
	p.Refuse() // idempotent
	_, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial while refusing: %v, want ECONNREFUSED", err)
	}
	roundTrip(t, open, "still")
	if err := p.Clear(); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, dial(t, p.Addr()), "back")
}

// TestTargetDown: a client of a proxy whose target refuses connections is
// connected, then reset; DialFailures counts it.
func TestTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	_ = ln.Close()
	p := faultproxy.StartT(t, down)
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err == nil { // the reset may come before or after connect returns
		defer func() { _ = c.Close() }()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
	}
	if !errors.Is(err, syscall.ECONNRESET) && err != io.EOF {
		t.Fatalf("connecting through a proxy to a closed port: %v, want ECONNRESET or EOF", err)
	}
	waitFor(t, "the dial failure to be counted", func() bool { return p.Stats().DialFailures == 1 })
}

// TestCloseEndsEverything: Close closes open and stalled connections and
// is idempotent; the context given to Start closes the proxy too. TestMain
// checks that no goroutine is left.
func TestCloseEndsEverything(t *testing.T) {
	srv := startEcho(t)
	p, err := faultproxy.Start(context.Background(), srv.addr())
	if err != nil {
		t.Fatal(err)
	}
	a, b := dial(t, p.Addr()), dial(t, p.Addr())
	roundTrip(t, a, "a")
	p.Stall(faultproxy.Both)
	if _, err := b.Write([]byte("b")); err != nil {
		t.Fatal(err)
	}
	p.Delay(faultproxy.Both, time.Hour)
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	p.Close()
	<-done
	for _, c := range []net.Conn{a, b} {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("read from a connection of a closed proxy succeeded")
		}
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("a closed proxy accepted a connection")
	}

	ctx, cancel := context.WithCancel(context.Background())
	p2, err := faultproxy.Start(ctx, srv.addr())
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p2.Addr())
	roundTrip(t, c, "x")
	cancel()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read succeeded after the proxy's context was cancelled")
	}
	p2.Close()
}

// TestStartErrors: a bad target and a done context are refused.
func TestStartErrors(t *testing.T) {
	for _, target := range []string{"", "localhost", "127.0.0.1"} {
		if p, err := faultproxy.Start(context.Background(), target); err == nil {
			p.Close()
			t.Errorf("Start(%q) succeeded, want an error", target)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p, err := faultproxy.Start(ctx, "127.0.0.1:1"); !errors.Is(err, context.Canceled) {
		if p != nil {
			p.Close()
		}
		t.Errorf("Start with a cancelled context: %v, want context.Canceled", err)
	}
}

// TestFaultsUnderConcurrency: clients exchange messages while faults
// switch on and off; every message that arrives arrives intact and in
// order, and the proxy stops cleanly. Run with -race.
func TestFaultsUnderConcurrency(t *testing.T) {
	testenv.Slow(t)
	srv := startEcho(t)
	p := faultproxy.StartT(t, srv.addr())
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				if err := exchange(ctx, p.Addr(), fmt.Sprintf("w%d-%d;", w, i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for ctx.Err() == nil {
		switch rng.IntN(7) {
		case 0:
			p.Stall(faultproxy.Direction(rng.IntN(4)))
		case 1:
			p.Delay(faultproxy.Direction(rng.IntN(4)), time.Duration(rng.IntN(20))*time.Millisecond)
		case 2:
			p.LoseReplies(rng.IntN(3), faultproxy.AfterLoss(rng.IntN(2)))
		case 3:
			p.Reset()
		case 4:
			p.Refuse()
		default:
			if err := p.Clear(); err != nil {
				t.Error(err)
			}
		}
		_ = p.Stats()
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
	}
	if err := p.Clear(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	roundTrip(t, dial(t, p.Addr()), "after")
}

// exchange sends msg on a new connection and checks that whatever comes
// back before a fault or timeout is a prefix of msg. Faults are expected;
// corrupted or reordered bytes are not.
func exchange(ctx context.Context, addr, msg string) error {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	c, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil // refused: a fault, not a defect
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(200 * time.Millisecond))
	for _, part := range []string{msg[:len(msg)/2], msg[len(msg)/2:]} {
		if _, err := c.Write([]byte(part)); err != nil {
			return nil
		}
	}
	got := make([]byte, 0, len(msg))
	buf := make([]byte, len(msg))
	for len(got) < len(msg) {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			break
		}
	}
	if !strings.HasPrefix(msg, string(got)) {
		return fmt.Errorf("sent %q, got back %q", msg, got)
	}
	return nil
}

// waitFor polls cond for up to 5s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
