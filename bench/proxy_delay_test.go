package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// echoServer echoes every connection until it ends; it stops with t.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestDelayProxy checks the delaying proxy through a local echo server:
// every byte comes back in order, no earlier than a round trip of the
// delay, and writes sent back to back are not serialised by it (the
// delay is a latency, not a turn: 20 pipelined messages take about one
// round trip, not 20).
func TestDelayProxy(t *testing.T) {
	const oneWay = 5 * time.Millisecond
	p, err := startDelayProxy(echoServer(t), oneWay)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))

	// One message: back no earlier than 2×oneWay.
	for i := range 3 {
		msg := []byte(fmt.Sprintf("ping %d\n", i))
		t0 := time.Now()
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		rtt := time.Since(t0)
		if !bytes.Equal(got, msg) {
			t.Fatalf("echo %q, want %q", got, msg)
		}
		if rtt < 2*oneWay {
			t.Errorf("a round trip took %v, under the proxy's 2×%v", rtt, oneWay)
		}
	}

	// 20 writes back to back, 1ms apart, then everything read back: in
	// order, and the whole in well under 20 round trips.
	var want bytes.Buffer
	t0 := time.Now()
	readDone := make(chan []byte)
	go func() {
		got := make([]byte, 20*len("msg 00 ")+64<<10)
		n, _ := io.ReadFull(c, got[:20*len("msg 00 ")+64<<10])
		readDone <- got[:n]
	}()
	for i := range 20 {
		m := fmt.Sprintf("msg %02d ", i)
		want.WriteString(m)
		if _, err := c.Write([]byte(m)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	// And one large write, split into many chunks on the way.
	big := bytes.Repeat([]byte("0123456789abcdef"), 4<<10)
	want.Write(big)
	if _, err := c.Write(big); err != nil {
		t.Fatal(err)
	}
	got := <-readDone
	el := time.Since(t0)
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("pipelined bytes came back changed or reordered (%d bytes, want %d)", len(got), want.Len())
	}
	if el < 2*oneWay {
		t.Errorf("pipelined bytes came back after %v, under the proxy's 2×%v", el, oneWay)
	}
	if el > 20*2*oneWay {
		t.Errorf("20 pipelined messages took %v: the proxy serialises them (one round trip is %v)", el, 2*oneWay)
	}

	// A half-close is passed on after the delay, and bytes still held are
	// delivered before it.
	if _, err := c.Write([]byte("last")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(c)
	if err != nil || string(rest) != "last" {
		t.Errorf("after a half-close: read %q, %v; want \"last\" and EOF", rest, err)
	}
}

// TestNetMode runs the net mode against miniredis, over a link of 1ms
// and loopback, and checks the report: the summary's rows, the measured
// round trip, the proxy process's CPU.
func TestNetMode(t *testing.T) {
	mr := miniredis.RunT(t)
	cfg := tiny(target{kindRedis, "redis://" + mr.Addr() + "/0"})
	cfg.modes = []string{"net"}
	cfg.netRTTs = []netSetting{{}, {rtt: time.Millisecond, proxied: true}}
	cfg.netWorkers = []int{1, 2}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := run(ctx, cfg, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	report := out.String()
	for _, re := range []string{
		`(?m)^link, workers +Redis cycle vs redislock +Redis renew vs redislock +Redis busy vs redislock$`,
		`(?m)^loopback, 1 worker +[0-9.]+× +[0-9.]+× +[0-9.]+×$`,
		`(?m)^1 ms RTT, 2 workers +[0-9.]+× +[0-9.]+× +[0-9.]+×$`,
		`1 ms RTT: measured round trip, Redis PING: median [0-9.]+ms .*the proxy adds 1.00ms`,
		`1 ms RTT, 2 workers: load average .* proxy process [0-9.]+s CPU`,
		`(?m)^1 ms RTT +1 +Redis +renew +[0-9,]+/s +bsm/redislock: [0-9,]+/s`,
	} {
		if !regexp.MustCompile(re).MatchString(report) {
			t.Errorf("the report does not match %s", re)
		}
	}
	// The link is slower than loopback: the measured round trip says so.
	m := regexp.MustCompile(`1 ms RTT: measured round trip, Redis PING: median ([0-9.]+)ms`).FindStringSubmatch(report)
	if len(m) == 2 {
		var med float64
		fmt.Sscan(m[1], &med)
		if med < 1 {
			t.Errorf("the measured round trip through a 1ms link is %vms", med)
		}
	}
	if strings.Contains(report, "error") || failedCount.MatchString(report) {
		t.Errorf("a contender failed")
	}
	if t.Failed() {
		t.Logf("report:\n%s", report)
	}
}
