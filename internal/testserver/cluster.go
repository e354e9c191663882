package testserver

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease/internal/testenv"
)

// RedisClusterOptions configures StartRedisCluster. A nil *RedisClusterOptions
// means the defaults.
type RedisClusterOptions struct {
	// Masters is how many masters share the 16384 slots: 3 (the
	// default) or more.
	Masters int
	// ReplicasPerMaster is how many replicas each master has: 0 (the
	// default), or 1 or more for failover tests.
	ReplicasPerMaster int
	// NodeTimeout is cluster-node-timeout: how long a node may fail to
	// answer before the others think it failed; 1.5s by default.
	NodeTimeout time.Duration
	// Persist gives every node an append-only file, as
	// RedisOptions.Persist does.
	Persist bool
}

// RedisCluster is a Redis Cluster of private redis-server nodes.
type RedisCluster struct {
	t       testing.TB
	nodes   []*Process
	ids     map[*Process]string // node ids: fixed for a node's life
	slotsOf map[string][][2]int // node id → slots, when the cluster was last ok
}

// StartRedisCluster starts the nodes (cluster-enabled, with their own
// cluster bus ports), assigns the slots evenly to the masters, joins the
// nodes, attaches the replicas, and waits until every node reports
// cluster_state:ok and every replica is in sync. Everything stops when the
// test ends.
//
// It skips the test (fails it under LEASE_TEST_REQUIRE_ALL=1) when
// redis-server is not installed (Debian package redis-server).
func StartRedisCluster(t testing.TB, opts *RedisClusterOptions) *RedisCluster {
	t.Helper()
	testenv.Slow(t) // starts server processes
	o := RedisClusterOptions{Masters: 3, NodeTimeout: 1500 * time.Millisecond}
	if opts != nil {
		o.Persist, o.ReplicasPerMaster = opts.Persist, max(opts.ReplicasPerMaster, 0)
		if opts.Masters > 0 {
			o.Masters = opts.Masters
		}
		if opts.NodeTimeout > 0 {
			o.NodeTimeout = opts.NodeTimeout
		}
	}
	bin := redisServer(t)
	n := o.Masters * (1 + o.ReplicasPerMaster)
	ports, err := freePorts(2 * n) // a client port and a cluster bus port per node
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	c := &RedisCluster{t: t, ids: map[*Process]string{}, slotsOf: map[string][][2]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), FailoverTimeout)
	defer cancel()
	for i := range n {
		mode := []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(o.NodeTimeout.Milliseconds(), 10),
			"--cluster-port", strconv.Itoa(ports[n+i]),
			"--cluster-replica-validity-factor", "0",
			"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
		}
		p := newRedis(t, bin, fmt.Sprintf("cluster-%d", i), ports[i], o.Persist, mode, nil)
		p.launch()
		id, err := redisString(ctx, p.addr, "CLUSTER", "MYID")
		if err != nil {
			t.Fatalf("testserver: %v", err)
		}
		c.nodes = append(c.nodes, p)
		c.ids[p] = id
	}
	for i := range o.Masters {
		first, last := i*16384/o.Masters, (i+1)*16384/o.Masters-1
		p := c.nodes[i]
		must(t, ctx, p.addr, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(first), strconv.Itoa(last))
		must(t, ctx, p.addr, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1))
	}
	for i := 1; i < n; i++ {
		must(t, ctx, c.nodes[0].addr, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(ports[i]), strconv.Itoa(ports[n+i]))
	}
	waitUntil(t, "cluster nodes to meet", FailoverTimeout, func(ctx context.Context) error {
		for _, p := range c.nodes {
			nodes, err := clusterNodes(ctx, p.addr)
			if err != nil {
				return err
			}
			if len(nodes) != n {
				return fmt.Errorf("%s knows %d nodes of %d", p.name, len(nodes), n)
			}
			for _, nd := range nodes {
				if nd.has("handshake") || nd.link != "connected" {
					return fmt.Errorf("%s sees %s as %s, %s", p.name, nd.addr, nd.flags, nd.link)
				}
			}
		}
		return nil
	})
	for i := o.Masters; i < n; i++ {
		master := c.nodes[(i-o.Masters)/o.ReplicasPerMaster]
		r := c.nodes[i]
		waitUntil(t, r.name+" to replicate "+master.name, FailoverTimeout, func(ctx context.Context) error {
			_, err := redisDo(ctx, r.addr, "CLUSTER", "REPLICATE", c.ids[master])
			return err
		})
	}
	c.WaitOK()
	waitUntil(t, "replicas to be in sync and known as such by every node", FailoverTimeout, func(ctx context.Context) error {
		for i, r := range c.nodes[o.Masters:] {
			info, err := redisString(ctx, r.addr, "INFO", "replication")
			if err != nil {
				return err
			}
			master := c.nodes[i/o.ReplicasPerMaster]
			if infoField(info, "role") != "slave" || infoField(info, "master_link_status") != "up" {
				return fmt.Errorf("%s: role %s, link %s", r.name, infoField(info, "role"), infoField(info, "master_link_status"))
			}
			for _, p := range c.nodes {
				nodes, err := clusterNodes(ctx, p.addr)
				if err != nil {
					return err
				}
				for _, nd := range nodes {
					if nd.id == c.ids[r] && (!nd.has("slave") || nd.master != c.ids[master]) {
						return fmt.Errorf("%s sees %s as %s of %s", p.name, r.name, nd.flags, nd.master)
					}
				}
			}
		}
		return nil
	})
	return c
}

// must runs a command that must succeed.
func must(t testing.TB, ctx context.Context, addr string, args ...string) {
	t.Helper()
	if _, err := redisDo(ctx, addr, args...); err != nil {
		t.Fatalf("testserver: %v", err)
	}
}

// Nodes returns every node: the first masters, then the replicas, the
// ones of the first master first. Roles change with failovers.
func (c *RedisCluster) Nodes() []*Process { return append([]*Process(nil), c.nodes...) }

// Addrs returns every node's address, for a cluster client
// (go-redis's ClusterOptions.Addrs).
func (c *RedisCluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, p := range c.nodes {
		addrs[i] = p.addr
	}
	return addrs
}

// WaitOK waits (up to FailoverTimeout) until every running node reports
// cluster_state:ok with all 16384 slots served.
func (c *RedisCluster) WaitOK() {
	c.t.Helper()
	waitUntil(c.t, "cluster_state:ok", FailoverTimeout, c.ok)
}

func (c *RedisCluster) ok(ctx context.Context) error {
	var view *Process
	for _, p := range c.nodes {
		if !p.Running() {
			continue
		}
		info, err := redisString(ctx, p.addr, "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		if infoField(info, "cluster_state") != "ok" || infoField(info, "cluster_slots_ok") != "16384" {
			return fmt.Errorf("%s: cluster_state %s, slots ok %s", p.name, infoField(info, "cluster_state"), infoField(info, "cluster_slots_ok"))
		}
		view = p
	}
	if view == nil {
		return fmt.Errorf("no node is running")
	}
	// Remember who serves which slots, for WaitForFailover.
	nodes, err := clusterNodes(ctx, view.addr)
	if err != nil {
		return err
	}
	slotsOf := map[string][][2]int{}
	for _, nd := range nodes {
		if nd.has("master") && !nd.has("fail") {
			slotsOf[nd.id] = nd.slots
		}
	}
	c.slotsOf = slotsOf
	return nil
}

// MasterFor returns the node that serves key's slot now, as a running
// node reports it.
func (c *RedisCluster) MasterFor(key string) *Process {
	c.t.Helper()
	var master *Process
	waitUntil(c.t, "a node to say who serves "+key, FailoverTimeout, func(ctx context.Context) error {
		p := c.running()
		if p == nil {
			return fmt.Errorf("no node is running")
		}
		v, err := redisDo(ctx, p.addr, "CLUSTER", "KEYSLOT", key)
		if err != nil {
			return err
		}
		slot, _ := v.(int64)
		nodes, err := clusterNodes(ctx, p.addr)
		if err != nil {
			return err
		}
		for _, nd := range nodes {
			if nd.has("master") && !nd.has("fail") && nd.serves(int(slot)) {
				if master = c.byID(nd.id); master != nil {
					return nil
				}
			}
		}
		return fmt.Errorf("%s knows no live master for slot %d", p.name, slot)
	})
	return master
}

// ReplicasOf returns the running nodes that replicate master now, as
// each of them reports it (INFO replication).
func (c *RedisCluster) ReplicasOf(master *Process) []*Process {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []*Process
	for _, p := range c.nodes {
		if p == master || !p.Running() {
			continue
		}
		info, err := redisString(ctx, p.addr, "INFO", "replication")
		if err != nil {
			c.t.Fatalf("testserver: %v", err)
		}
		if infoField(info, "role") == "slave" && infoField(info, "master_host")+":"+infoField(info, "master_port") == master.addr {
			out = append(out, p)
		}
	}
	return out
}

// Failover makes replica take over from its master the way an operator
// does (CLUSTER FAILOVER: the master stops writes, the replica catches up,
// then is promoted), and waits until it says it is a master, every running
// node sees it as one, and the cluster is ok.
func (c *RedisCluster) Failover(replica *Process) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	must(c.t, ctx, replica.addr, "CLUSTER", "FAILOVER")
	c.waitMaster(replica)
}

// WaitForFailover waits until the cluster has replaced the master from
// (after Kill or Pause): another live node serves the slots from served
// when the cluster was last seen ok by a helper (start, WaitOK, Failover,
// WaitForFailover), every running node sees it as a master, and the
// cluster is ok. It returns the new master.
func (c *RedisCluster) WaitForFailover(from *Process) *Process {
	c.t.Helper()
	slots := c.slotsOf[c.ids[from]]
	if len(slots) == 0 {
		c.t.Fatalf("testserver: %s served no slots when the cluster was last ok", from.name)
	}
	var promoted *Process
	waitUntil(c.t, "another node to take over from "+from.name, FailoverTimeout, func(ctx context.Context) error {
		p := c.running()
		if p == nil {
			return fmt.Errorf("no node is running")
		}
		nodes, err := clusterNodes(ctx, p.addr)
		if err != nil {
			return err
		}
		for _, nd := range nodes {
			if nd.id != c.ids[from] && nd.has("master") && !nd.has("fail") && nd.serves(slots[0][0]) {
				promoted = c.byID(nd.id)
				return nil
			}
		}
		return fmt.Errorf("%s sees no other live master for slot %d", p.name, slots[0][0])
	})
	c.waitMaster(promoted)
	return promoted
}

// waitMaster waits until p says it is a master, every running node sees
// it as one, and the cluster is ok.
func (c *RedisCluster) waitMaster(p *Process) {
	c.t.Helper()
	waitUntil(c.t, p.name+" to be master", FailoverTimeout, func(ctx context.Context) error {
		info, err := redisString(ctx, p.addr, "INFO", "replication")
		if err != nil {
			return err
		}
		if role := infoField(info, "role"); role != "master" {
			return fmt.Errorf("%s says it is a %s", p.name, role)
		}
		for _, q := range c.nodes {
			if !q.Running() {
				continue
			}
			nodes, err := clusterNodes(ctx, q.addr)
			if err != nil {
				return err
			}
			for _, nd := range nodes {
				if nd.id == c.ids[p] && !nd.has("master") {
					return fmt.Errorf("%s sees %s as %s", q.name, p.name, nd.flags)
				}
			}
		}
		return c.ok(ctx)
	})
}

func (c *RedisCluster) running() *Process {
	for _, p := range c.nodes {
		if p.Running() {
			return p
		}
	}
	return nil
}

func (c *RedisCluster) byID(id string) *Process {
	for p, pid := range c.ids {
		if pid == id {
			return p
		}
	}
	return nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, flags, master, link string
	slots                         [][2]int
}

func (n clusterNode) has(flag string) bool {
	for _, f := range strings.Split(n.flags, ",") {
		if f == flag {
			return true
		}
	}
	return false
}

func (n clusterNode) serves(slot int) bool {
	for _, r := range n.slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

// clusterNodes returns the node table as the node at addr sees it.
func clusterNodes(ctx context.Context, addr string) ([]clusterNode, error) {
	s, err := redisString(ctx, addr, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	var out []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		a, _, _ := strings.Cut(f[1], "@")
		n := clusterNode{id: f[0], addr: a, flags: f[2], master: f[3], link: f[7]}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			lo, hi, found := strings.Cut(r, "-")
			if !found {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil {
				n.slots = append(n.slots, [2]int{a, b})
			}
		}
		out = append(out, n)
	}
	return out, nil
}
