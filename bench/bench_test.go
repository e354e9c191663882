package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// These tests check that every mode runs and reports, with tiny counts;
// they assert nothing about speed. They run against miniredis and an
// embedded etcd always, and against the real servers named by
// LEASE_TEST_REDIS, LEASE_TEST_POSTGRES, LEASE_TEST_MYSQL and
// LEASE_TEST_ETCD when those are set (LEASE_TEST_REQUIRE_ALL=1 turns a
// missing one into a failure, as in the main module).

// tiny is a configuration that runs every mode in a few seconds.
func tiny(t target) config {
	return config{
		targets: []target{t},
		modes:   allModes,
		workers: 2, rounds: 1, dur: 100 * time.Millisecond, ttl: 2 * time.Second,
		contenders: 2, hold: time.Millisecond,
		rttReps: 1, batch: 5, idle: 10 * time.Millisecond,
		scaleN: []int{5}, scaleTTL: 1500 * time.Millisecond, scaleHold: 2500 * time.Millisecond, scalePool: 4,
		waiters: 2, handoffHold: time.Millisecond, waitLimit: 10 * time.Second,
	}
}

// failedCount matches a report's count of failed calls.
var failedCount = regexp.MustCompile(`[0-9]+ (failed|callers failed)`)

// runAll runs every mode against t and checks the report: a table per
// mode, rows for lease and the peers, no error cell, no violation.
func runAll(tb testing.TB, t target, wantPeers ...string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := run(ctx, tiny(t), &out, &errOut); err != nil {
		tb.Fatalf("run: %v\n%s", err, errOut.String())
	}
	report := out.String()
	for _, mode := range allModes {
		if !strings.Contains(report, "== "+mode+":") {
			tb.Errorf("the report has no %s table", mode)
		}
	}
	for _, peer := range wantPeers {
		if !strings.Contains(report, peer+": ") {
			tb.Errorf("the report has no row for %s", peer)
		}
	}
	sc := bufio.NewScanner(strings.NewReader(report))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		switch {
		case strings.Contains(line, "VIOLATIONS"):
			tb.Errorf("mutual exclusion broken: %s", line)
		case len(f) > 2 && f[2] == "error", strings.Contains(line, ": error"):
			tb.Errorf("a contender failed: %s", line)
		case failedCount.MatchString(line):
			tb.Errorf("calls failed: %s", line)
		}
	}
	if tb.Failed() {
		tb.Logf("report:\n%s", report)
	}
	return report
}

func TestMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	runAll(t, target{kindRedis, "redis://" + mr.Addr() + "/0"}, "bsm/redislock", "go-redsync/redsync (one pool)", "raw floor (SET NX PX + scripts)")
}

func TestEmbeddedEtcd(t *testing.T) {
	runAll(t, target{kindEtcd, startEtcd(t)}, "concurrency.Mutex (on a Session)", "KeepAliveOnce (granted lease)")
}

func TestRedis(t *testing.T) {
	serverCPUReported(t, runAll(t, target{kindRedis, lookup(t, "LEASE_TEST_REDIS")}, "bsm/redislock"), "Redis")
}

func TestPostgres(t *testing.T) {
	report := runAll(t, target{kindPostgres, lookup(t, "LEASE_TEST_POSTGRES")}, "row floor (upsert + fenced update)", "pg_advisory_lock (session lock, not a lease)")
	if loopback(os.Getenv("LEASE_TEST_POSTGRES")) {
		serverCPUReported(t, report, "PostgreSQL")
	}
}

func TestMySQL(t *testing.T) {
	report := runAll(t, target{kindMySQL, lookup(t, "LEASE_TEST_MYSQL")}, "row floor (upsert + fenced update)", "GET_LOCK (session lock, not a lease)")
	if loopback(os.Getenv("LEASE_TEST_MYSQL")) {
		serverCPUReported(t, report, "(MySQL|MariaDB)")
	}
}

func TestEtcd(t *testing.T) {
	serverCPUReported(t, runAll(t, target{kindEtcd, lookup(t, "LEASE_TEST_ETCD")}, "concurrency.Mutex (on a Session)"), "etcd")
}

// serverCPUReported checks that the cycle, renew and busy tables say what
// lease's operations cost in CPU on both sides, the server's read from
// the store (label: a pattern for its rows' store column, which names
// the server it found).
func serverCPUReported(t *testing.T, report, label string) {
	t.Helper()
	for _, op := range []string{"acquire+release", "renew", "busy acquire"} {
		re := regexp.MustCompile(`(?m)^  \* ` + label + ` lease, ` + regexp.QuoteMeta(op) + `: CPU client [0-9]+µs/op \([0-9]+% of a CPU\), server [0-9]+µs/op`)
		if !re.MatchString(report) {
			t.Errorf("the %s table has no CPU note for lease on %s with both sides", op, label)
		}
	}
}

// TestMarkdown checks that -markdown prints markdown tables.
func TestMarkdown(t *testing.T) {
	mr := miniredis.RunT(t)
	cfg := tiny(target{kindRedis, "redis://" + mr.Addr()})
	cfg.modes, cfg.markdown = []string{"cycle"}, true
	var out bytes.Buffer
	if err := run(context.Background(), cfg, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| store | operation | lease | peer | ratio |", "|---|---|---|---|---|", "| Redis "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("markdown report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestFlags checks the command line's checks.
func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "name at least one store"},
		{[]string{"-redis", "redis://x", "-mode", "nope"}, `unknown mode "nope"`},
		{[]string{"-redis", "redis://x", "-scale-n", "10,x"}, `-scale-n: "x"`},
		{[]string{"-redis", "redis://x", "-workers", "0"}, "-workers must be at least 1"},
		{[]string{"-redis", "redis://x", "-ttl", "1s"}, "-ttl must be at least 2s"},
		{[]string{"-redis", "redis://x", "extra"}, `unexpected argument "extra"`},
		{[]string{"-redis", "redis://x", "-rtt-list", "fast"}, `-rtt-list: "fast"`},
		{[]string{"-redis", "redis://x", "-rtt-list", "-1ms"}, `-rtt-list: "-1ms"`},
		{[]string{"-redis", "redis://x", "-workers-list", "1,0"}, `-workers-list: "0"`},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	var help bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "-scale-n") {
		t.Errorf("-h: err %v, usage:\n%s", err, help.String())
	}
	cfg, err := parseFlags([]string{"-redis", "redis://x", "-mode", "all,rtt", "-scale-n", "100,1000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cfg.modes) != fmt.Sprint(allModes) || fmt.Sprint(cfg.scaleN) != "[100 1000]" {
		t.Errorf("modes %v, scale-n %v", cfg.modes, cfg.scaleN)
	}
	cfg, err = parseFlags([]string{"-redis", "redis://x", "-mode", "net", "-rtt-list", "loopback,proxy,0.5ms,2ms", "-workers-list", "1,8,64"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var links []string
	for _, st := range cfg.netRTTs {
		links = append(links, st.String())
	}
	if got := strings.Join(links, "; "); fmt.Sprint(cfg.modes) != "[net]" || got != "loopback; proxy, no delay; 0.5 ms RTT; 2 ms RTT" || fmt.Sprint(cfg.netWorkers) != "[1 8 64]" {
		t.Errorf("modes %v, links %q, workers %v", cfg.modes, got, cfg.netWorkers)
	}
}

// TestProxyCountsTurns checks the proxy's count: three requests, each
// waiting for its reply, are three round trips, and two requests sent
// before a reply are one.
func TestProxyCountsTurns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if _, err := c.Write([]byte(line)); err != nil {
				return
			}
		}
	}()
	p, err := startProxy(ln.Addr().String())
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
	r := bufio.NewReader(c)
	for i := range 3 {
		fmt.Fprintf(c, "ping %d\n", i)
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.RoundTrips(); got != 3 {
		t.Errorf("3 requests with replies: %d round trips, want 3", got)
	}
	fmt.Fprint(c, "a\nb\n") // pipelined: one turn
	for range 2 {
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.RoundTrips(); got != 4 {
		t.Errorf("after a pipelined pair: %d round trips, want 4", got)
	}
}

// lookup returns the environment variable env, or skips t (fails it when
// LEASE_TEST_REQUIRE_ALL=1).
func lookup(t *testing.T, env string) string {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		return v
	}
	if os.Getenv("LEASE_TEST_REQUIRE_ALL") == "1" {
		t.Fatalf("%s is not set and LEASE_TEST_REQUIRE_ALL=1", env)
	}
	t.Skipf("%s is not set: skipping the run against a real server", env)
	return ""
}

// startEtcd starts an embedded single-member etcd on loopback (a 100ms
// election timeout, so leases of 1s are granted), stopped when t ends, and
// returns its client endpoint.
func startEtcd(t *testing.T) string {
	t.Helper()
	ports := make([]int, 2)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
	}
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])}
	cfg := embed.NewConfig()
	cfg.Name = "bench"
	cfg.Dir = t.TempDir()
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatal(err)
	case <-time.After(30 * time.Second):
		t.Fatal("embedded etcd not ready after 30s")
	}
	// Serving HTTP means the client listener is fully set up.
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := hc.Get(client.String() + "/version")
		if err == nil {
			_ = resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("embedded etcd does not serve: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return client.Host
}
