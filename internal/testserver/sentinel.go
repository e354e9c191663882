package testserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease/internal/testenv"
)

// FailoverTimeout bounds how long StartSentinel and StartRedisCluster
// wait for replication and agreement, and how long a failover may take.
const FailoverTimeout = 30 * time.Second

// SentinelOptions configures StartSentinel. A nil *SentinelOptions means
// the defaults.
type SentinelOptions struct {
	// Replicas is how many replicas the master has: 1 (the default) or
	// more.
	Replicas int
	// Sentinels is how many sentinels watch the master: 3 by default;
	// their quorum is a majority of them.
	Sentinels int
	// MasterName is the name the sentinels know the master by;
	// "mymaster" by default.
	MasterName string
	// DownAfter is how long the master must fail to answer before a
	// sentinel thinks it down (down-after-milliseconds); 1s by default,
	// so a killed master is replaced within a few seconds.
	DownAfter time.Duration
	// Persist gives the data servers an append-only file, as
	// RedisOptions.Persist does.
	Persist bool
}

// Sentinel is a Redis master with replicas, watched by sentinels, all on
// their own ports. Kill or Pause a server through Servers or Master; the
// sentinels then fail over on their own, and WaitForFailover waits for it.
type Sentinel struct {
	t         testing.TB
	name      string
	servers   []*Process
	sentinels []*Process
}

// StartSentinel starts a master, its replicas (replicating before it
// returns) and the sentinels (each knowing every replica and every other
// sentinel before it returns), all stopped when the test ends.
//
// It skips the test (fails it under LEASE_TEST_REQUIRE_ALL=1) when
// redis-server is not installed. It runs redis-sentinel (Debian package
// redis-sentinel) when installed, or else redis-server --sentinel, which
// is the same program.
func StartSentinel(t testing.TB, opts *SentinelOptions) *Sentinel {
	t.Helper()
	testenv.Slow(t) // starts server processes
	o := SentinelOptions{Replicas: 1, Sentinels: 3, MasterName: "mymaster", DownAfter: time.Second}
	if opts != nil {
		o.Persist = opts.Persist
		if opts.Replicas > 0 {
			o.Replicas = opts.Replicas
		}
		if opts.Sentinels > 0 {
			o.Sentinels = opts.Sentinels
		}
		if opts.MasterName != "" {
			o.MasterName = opts.MasterName
		}
		if opts.DownAfter > 0 {
			o.DownAfter = opts.DownAfter
		}
	}
	bin := redisServer(t)
	sentinelArgv := []string{bin, "", "--sentinel"}
	if path, err := exec.LookPath("redis-sentinel"); err == nil {
		sentinelArgv = []string{path, ""}
	}
	ports, err := freePorts(1 + o.Replicas + o.Sentinels)
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	s := &Sentinel{t: t, name: o.MasterName}
	master := loopback(ports[0])
	repl := []string{"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1"}
	for i := 0; i <= o.Replicas; i++ {
		mode := repl
		if i > 0 {
			mode = append(append([]string(nil), repl...), "--replicaof", "127.0.0.1", strconv.Itoa(ports[0]))
		}
		p := newRedis(t, bin, fmt.Sprintf("redis-%d", i), ports[i], o.Persist, mode, nil)
		p.launch()
		s.servers = append(s.servers, p)
	}
	waitUntil(t, "replicas replicating from "+master, FailoverTimeout, func(ctx context.Context) error {
		return replicating(ctx, master, s.servers[1:])
	})

	quorum := o.Sentinels/2 + 1
	for i := range o.Sentinels {
		port := ports[1+o.Replicas+i]
		name := fmt.Sprintf("sentinel-%d", i)
		dir, err := mkdir(t, name)
		if err != nil {
			t.Fatalf("testserver: %v", err)
		}
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
daemonize no
logfile ""
dir %s
sentinel monitor %s 127.0.0.1 %d %d
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s 10000
sentinel parallel-syncs %s %d
`, port, dir, o.MasterName, ports[0], quorum, o.MasterName, o.DownAfter.Milliseconds(), o.MasterName, o.MasterName, o.Replicas)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatalf("testserver: %v", err)
		}
		argv := append([]string(nil), sentinelArgv...)
		argv[1] = conf
		p, err := newProcess(t, name, loopback(port), dir, argv...)
		if err != nil {
			t.Fatalf("testserver: %v", err)
		}
		p.url = "redis://" + p.addr
		p.ready = pingRedis(p.addr)
		p.launch()
		s.sentinels = append(s.sentinels, p)
	}
	waitUntil(t, "sentinels to know the master, its replicas and each other", FailoverTimeout, func(ctx context.Context) error {
		for _, sp := range s.sentinels {
			v, err := redisDo(ctx, sp.addr, "SENTINEL", "MASTER", o.MasterName)
			if err != nil {
				return err
			}
			m := pairs(v)
			if m["num-slaves"] != strconv.Itoa(o.Replicas) || m["num-other-sentinels"] != strconv.Itoa(o.Sentinels-1) || m["flags"] != "master" {
				return fmt.Errorf("%s sees replicas=%s other-sentinels=%s flags=%s", sp.name, m["num-slaves"], m["num-other-sentinels"], m["flags"])
			}
		}
		return nil
	})
	return s
}

// replicating checks that every running server in replicas replicates
// from master with its link up.
func replicating(ctx context.Context, master string, replicas []*Process) error {
	for _, r := range replicas {
		if !r.Running() {
			continue
		}
		info, err := redisString(ctx, r.addr, "INFO", "replication")
		if err != nil {
			return err
		}
		host, port := infoField(info, "master_host"), infoField(info, "master_port")
		if infoField(info, "role") != "slave" || host+":"+port != master || infoField(info, "master_link_status") != "up" {
			return fmt.Errorf("%s: role %s, master %s:%s, link %s", r.name, infoField(info, "role"), host, port, infoField(info, "master_link_status"))
		}
	}
	return nil
}

// MasterName returns the name the sentinels know the master by.
func (s *Sentinel) MasterName() string { return s.name }

// SentinelAddrs returns the sentinels' addresses, for a failover client
// (go-redis's FailoverOptions.SentinelAddrs).
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.sentinels))
	for i, p := range s.sentinels {
		addrs[i] = p.addr
	}
	return addrs
}

// Sentinels returns the sentinel processes.
func (s *Sentinel) Sentinels() []*Process { return append([]*Process(nil), s.sentinels...) }

// Servers returns the data servers: the first master, then its replicas.
// Roles change with failovers; Master says which one is master now.
func (s *Sentinel) Servers() []*Process { return append([]*Process(nil), s.servers...) }

// MasterAddr returns the master's address as a majority of the running
// sentinels report it, waiting (up to FailoverTimeout) for them to agree.
func (s *Sentinel) MasterAddr() string {
	s.t.Helper()
	var addr string
	waitUntil(s.t, "sentinels to agree on a master", FailoverTimeout, func(ctx context.Context) error {
		var err error
		addr, err = s.agreedMaster(ctx, "")
		return err
	})
	return addr
}

// Master returns the data server the sentinels report as master now.
func (s *Sentinel) Master() *Process {
	s.t.Helper()
	return s.server(s.MasterAddr())
}

// Failover asks a sentinel for a failover (SENTINEL FAILOVER), as an
// operator would for maintenance, and waits until the sentinels report a
// new master that says it is one. It returns the new master. The old
// master, if it runs, is turned into a replica by the sentinels some
// seconds later.
func (s *Sentinel) Failover() *Process {
	s.t.Helper()
	old := s.Master()
	waitUntil(s.t, "a sentinel to accept SENTINEL FAILOVER", FailoverTimeout, func(ctx context.Context) error {
		sp := s.runningSentinel()
		if sp == nil {
			return fmt.Errorf("no sentinel is running")
		}
		_, err := redisDo(ctx, sp.addr, "SENTINEL", "FAILOVER", s.name)
		if err != nil && !strings.Contains(err.Error(), "NOGOODSLAVE") && !strings.Contains(err.Error(), "INPROG") {
			s.t.Fatalf("testserver: SENTINEL FAILOVER: %v", err)
		}
		return err
	})
	return s.WaitForFailover(old)
}

// WaitForFailover waits (up to FailoverTimeout) until the sentinels agree
// on a master other than from and that server says it is master, and
// returns it. Use it after killing or pausing the master.
func (s *Sentinel) WaitForFailover(from *Process) *Process {
	s.t.Helper()
	var addr string
	waitUntil(s.t, "the sentinels to fail over from "+from.addr, FailoverTimeout, func(ctx context.Context) error {
		a, err := s.agreedMaster(ctx, from.addr)
		if err != nil {
			return err
		}
		info, err := redisString(ctx, a, "INFO", "replication")
		if err != nil {
			return err
		}
		if role := infoField(info, "role"); role != "master" {
			return fmt.Errorf("the sentinels' new master %s says it is a %s", a, role)
		}
		addr = a
		return nil
	})
	return s.server(addr)
}

// agreedMaster returns the master address that a majority of the
// sentinels report, if it is not notAddr.
func (s *Sentinel) agreedMaster(ctx context.Context, notAddr string) (string, error) {
	votes := map[string]int{}
	var lastErr error
	for _, sp := range s.sentinels {
		if !sp.Running() {
			continue
		}
		v, err := redisDo(ctx, sp.addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.name)
		if err != nil {
			lastErr = err
			continue
		}
		if arr, ok := v.([]any); ok && len(arr) == 2 {
			host, _ := arr[0].(string)
			port, _ := arr[1].(string)
			votes[host+":"+port]++
		}
	}
	for addr, n := range votes {
		if n > len(s.sentinels)/2 && addr != notAddr {
			return addr, nil
		}
	}
	return "", fmt.Errorf("sentinels report masters %v (last error %v)", votes, lastErr)
}

func (s *Sentinel) runningSentinel() *Process {
	for _, sp := range s.sentinels {
		if sp.Running() {
			return sp
		}
	}
	return nil
}

// server returns the data server at addr, failing the test if none is.
func (s *Sentinel) server(addr string) *Process {
	s.t.Helper()
	for _, p := range s.servers {
		if p.addr == addr {
			return p
		}
	}
	s.t.Fatalf("testserver: the sentinels report master %s, which is none of the servers", addr)
	return nil
}
