package testserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease/internal/testenv"
)

// EtcdOptions configures StartEtcd. A nil *EtcdOptions is one member with
// the default timeouts.
type EtcdOptions struct {
	// Members is how many members the cluster has: 1 (the default), or 3
	// or 5 for leader and quorum tests.
	Members int
	// HeartbeatInterval and ElectionTimeout are etcd's raft timings.
	// By default a single member uses 10ms and 100ms, as .ci/run does
	// (so 1s leases are allowed), and a cluster 50ms and 500ms, so that a
	// loaded 2-CPU machine does not trigger elections no test asked for;
	// a killed leader is then replaced in about a second. etcd's shortest
	// lease is 1.5 election timeouts, rounded up to whole seconds.
	HeartbeatInterval, ElectionTimeout time.Duration
}

// Etcd is an etcd cluster of private members (Debian's etcd program),
// each a *Process with its own client and peer ports and data directory.
// Stop, Kill, Pause, Start and Restart a member through Member; its data
// directory is kept, so a started member rejoins the cluster.
type Etcd struct {
	t       testing.TB
	members []*Process
	ids     []string // member ids (decimal), index-aligned with members
}

// StartEtcd starts the members (together, as a new cluster needs), waits
// until every one is healthy (it has a leader and serves a quorum read),
// and stops them when the test ends.
//
// It skips the test (fails it under LEASE_TEST_REQUIRE_ALL=1) when etcd is
// not installed (Debian package etcd-server).
func StartEtcd(t testing.TB, opts *EtcdOptions) *Etcd {
	t.Helper()
	testenv.Slow(t) // starts server processes
	o := EtcdOptions{Members: 1}
	if opts != nil {
		o = *opts
		o.Members = max(o.Members, 1)
	}
	if o.HeartbeatInterval <= 0 || o.ElectionTimeout <= 0 {
		if o.Members == 1 {
			o.HeartbeatInterval, o.ElectionTimeout = 10*time.Millisecond, 100*time.Millisecond
		} else {
			o.HeartbeatInterval, o.ElectionTimeout = 50*time.Millisecond, 500*time.Millisecond
		}
	}
	needUnix(t)
	bin := testenv.RequireBinary(t, "etcd", "etcd-server")
	ports, err := freePorts(2 * o.Members)
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	var token [6]byte
	_, _ = rand.Read(token[:])
	var initial []string
	for i := range o.Members {
		initial = append(initial, fmt.Sprintf("etcd-%d=http://%s", i, loopback(ports[o.Members+i])))
	}
	e := &Etcd{t: t, ids: make([]string, o.Members)}
	for i := range o.Members {
		name := fmt.Sprintf("etcd-%d", i)
		dir, err := mkdir(t, name)
		if err != nil {
			t.Fatalf("testserver: %v", err)
		}
		client, peer := "http://"+loopback(ports[i]), "http://"+loopback(ports[o.Members+i])
		p, err := newProcess(t, name, loopback(ports[i]), dir, bin,
			"--name", name,
			"--data-dir", dir,
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", "testserver-"+hex.EncodeToString(token[:]),
			"--heartbeat-interval", strconv.FormatInt(o.HeartbeatInterval.Milliseconds(), 10),
			"--election-timeout", strconv.FormatInt(o.ElectionTimeout.Milliseconds(), 10),
			"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn",
		)
		if err != nil {
			t.Fatalf("testserver: %v", err)
		}
		p.url = "etcd://" + p.addr
		p.ready = e.memberReady(p)
		t.Cleanup(p.cleanup)
		e.members = append(e.members, p)
	}
	// A new cluster's members wait for each other: start them all, then
	// wait.
	for _, p := range e.members {
		if err := p.begin(); err != nil {
			t.Fatalf("testserver: %v", err)
		}
	}
	for _, p := range e.members {
		if err := p.awaitReady(); err != nil {
			t.Fatalf("testserver: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, p := range e.members {
		st, err := etcdStatus(ctx, p.addr)
		if err != nil {
			t.Fatalf("testserver: %v", err)
		}
		e.ids[i] = st.Header.MemberID
	}
	return e
}

// memberReady is a member's readiness check: healthy (a leader and a
// quorum read) when a majority of the members run, else merely serving
// its client port, since it cannot be healthy without a quorum.
func (e *Etcd) memberReady(p *Process) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		running := 0
		for _, m := range e.members {
			if m.Running() {
				running++
			}
		}
		if running <= len(e.members)/2 {
			_, err := httpGet(ctx, "http://"+p.addr+"/version")
			return err
		}
		body, err := httpGet(ctx, "http://"+p.addr+"/health")
		if err != nil {
			return err
		}
		if !strings.Contains(body, `"health":"true"`) {
			return fmt.Errorf("%s: /health says %s", p.name, strings.TrimSpace(body))
		}
		return nil
	}
}

// Endpoints returns every member's client address, host:port, for
// clientv3.Config.Endpoints, in member order.
func (e *Etcd) Endpoints() []string {
	eps := make([]string, len(e.members))
	for i, p := range e.members {
		eps[i] = p.addr
	}
	return eps
}

// URL returns "etcd://host:port[,host:port...]" naming every member, the
// form backend/etcd's Open takes.
func (e *Etcd) URL() string { return "etcd://" + strings.Join(e.Endpoints(), ",") }

// Members returns the member processes, in member order.
func (e *Etcd) Members() []*Process { return append([]*Process(nil), e.members...) }

// Member returns member i (0-based).
func (e *Etcd) Member(i int) *Process { return e.members[i] }

// Leader returns the index of the leader, waiting (up to
// FailoverTimeout) until a majority of the members report the same
// running leader.
func (e *Etcd) Leader() int {
	e.t.Helper()
	leader := -1
	waitUntil(e.t, "a majority of etcd members to agree on a running leader", FailoverTimeout, func(ctx context.Context) error {
		votes := map[string]int{}
		var lastErr error
		for _, p := range e.members {
			if !p.Running() {
				continue
			}
			st, err := etcdStatus(ctx, p.addr)
			if err != nil {
				lastErr = err
				continue
			}
			votes[st.Leader]++
		}
		for id, n := range votes {
			if n <= len(e.members)/2 {
				continue
			}
			for i, mid := range e.ids {
				if mid == id && e.members[i].Running() {
					leader = i
					return nil
				}
			}
		}
		return fmt.Errorf("members report leaders %v (member ids %v; last error %v)", votes, e.ids, lastErr)
	})
	return leader
}

// KillLeader kills the current leader (SIGKILL) and returns its index;
// the others elect a new one if they are a majority (Leader waits for it).
func (e *Etcd) KillLeader() int {
	e.t.Helper()
	i := e.Leader()
	e.members[i].Kill()
	return i
}

// etcdStatusReply is the part of the gRPC gateway's
// /v3/maintenance/status answer the helpers read (64-bit numbers come as
// strings).
type etcdStatusReply struct {
	Header struct {
		MemberID string `json:"member_id"`
	} `json:"header"`
	Leader string `json:"leader"`
}

// etcdStatus asks the member at addr for its status.
func etcdStatus(ctx context.Context, addr string) (etcdStatusReply, error) {
	var st etcdStatusReply
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v3/maintenance/status", strings.NewReader("{}"))
	if err != nil {
		return st, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return st, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s: status: %s: %s", addr, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("%s: status: %w", addr, err)
	}
	if st.Header.MemberID == "" {
		return st, fmt.Errorf("%s: status without a member id: %s", addr, body)
	}
	return st, nil
}

// httpClient keeps no idle connection, so no goroutine of it outlives a
// request (goleak) and a killed member leaves nothing behind.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// httpGet returns the body of a GET.
func httpGet(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), nil
}
