package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cpuMeter reads the CPU time a contender costs: this process's (the
// client side: lease's Go code or a peer's, and the driver under it) and,
// where it can be read, the store server's. Both are cumulative counters;
// runTimed takes their difference around a timed run, and the report
// divides it by the operations completed.
type cpuMeter struct {
	// server reads the server's cumulative CPU time, or nil when this
	// run cannot (a remote SQL server, etcd over TLS).
	server func(ctx context.Context) (time.Duration, error)
	// what says where server reads it from.
	what string
}

// cpuUse is the CPU time of one timed run, or of several summed.
type cpuUse struct {
	client, server time.Duration
	serverKnown    bool // the server was read in every run summed
	runs           int
	ops            int64
	elapsed        time.Duration
}

func (u *cpuUse) add(v cpuUse) {
	u.serverKnown = (u.runs == 0 || u.serverKnown) && v.serverKnown
	u.runs++
	u.client += v.client
	u.server += v.server
	u.ops += v.ops
	u.elapsed += v.elapsed
}

// String is the CPU time per operation and the share of the run's time
// each side was busy (100% is one CPU), as the report's notes print it.
func (u cpuUse) String() string {
	if u.ops == 0 || u.elapsed <= 0 {
		return "no operations completed"
	}
	per := func(d time.Duration) string {
		return fmt.Sprintf("%.0fµs/op (%.0f%% of a CPU)", float64(d)/float64(u.ops)/float64(time.Microsecond), 100*float64(d)/float64(u.elapsed))
	}
	s := "client " + per(u.client)
	if u.serverKnown {
		s += ", server " + per(u.server)
	}
	return s
}

// start reads both counters; the function it returns reads them again
// and returns the difference for ops operations. A server counter that
// cannot be read leaves serverKnown false.
func (m *cpuMeter) start(ctx context.Context) func(ops int64) cpuUse {
	c0, ok0 := selfCPU()
	s0, err0 := m.readServer(ctx)
	t0 := time.Now()
	return func(ops int64) cpuUse {
		elapsed := time.Since(t0)
		c1, ok1 := selfCPU()
		s1, err1 := m.readServer(ctx)
		u := cpuUse{ops: ops, elapsed: elapsed}
		if ok0 && ok1 {
			u.client = c1 - c0
		}
		if err0 == nil && err1 == nil && s1 >= s0 {
			u.server, u.serverKnown = s1-s0, true
		}
		return u
	}
}

func (m *cpuMeter) readServer(ctx context.Context) (time.Duration, error) {
	if m == nil || m.server == nil {
		return 0, fmt.Errorf("server CPU not measured")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return m.server(ctx)
}

// serverCPUMeter returns the meter for c's server at addr (the flag's
// value): Redis's INFO cpu, etcd's /metrics (process_cpu_seconds_total,
// of the first endpoint's member only), and for PostgreSQL and
// MariaDB/MySQL, which have no such counter, the processes of that name
// on this machine when addr is a loopback address.
func serverCPUMeter(c *storeConn, addr string) *cpuMeter {
	switch c.kind {
	case kindRedis:
		return &cpuMeter{what: "Redis INFO cpu (used_cpu_user + used_cpu_sys)", server: func(ctx context.Context) (time.Duration, error) {
			info, err := c.redis.Info(ctx, "cpu").Result()
			if err != nil {
				return 0, err
			}
			return sumFields(info, ":", "used_cpu_user", "used_cpu_sys")
		}}
	case kindEtcd:
		eps := c.etcd.Endpoints()
		if len(eps) == 0 {
			return &cpuMeter{what: "not measured (no endpoint)"}
		}
		u := eps[0]
		if !strings.Contains(u, "://") {
			u = "http://" + u
		}
		if !strings.HasPrefix(u, "http://") {
			return &cpuMeter{what: "not measured (etcd over TLS)"}
		}
		metrics := strings.TrimSuffix(u, "/") + "/metrics"
		// A client of its own, whose idle connection closes with c.
		tr := &http.Transport{}
		c.onClose(tr.CloseIdleConnections)
		hc := &http.Client{Transport: tr}
		return &cpuMeter{what: "etcd " + metrics + " (process_cpu_seconds_total, one member)", server: func(ctx context.Context) (time.Duration, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, metrics, nil)
			if err != nil {
				return 0, err
			}
			resp, err := hc.Do(req)
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
			if err != nil {
				return 0, err
			}
			return sumFields(string(b), " ", "process_cpu_seconds_total")
		}}
	case kindPostgres, kindMySQL:
		names := []string{"postgres"}
		if c.kind == kindMySQL {
			names = []string{"mariadbd", "mysqld"}
		}
		if !loopback(addr) {
			return &cpuMeter{what: "not measured (the server is not on this machine)"}
		}
		return &cpuMeter{what: "the " + strings.Join(names, "/") + " processes on this machine (/proc)", server: func(context.Context) (time.Duration, error) {
			return procCPU(names)
		}}
	}
	return &cpuMeter{what: "not measured (unknown store)"}
}

// sumFields adds the values of fields in text, one "field<sep>value" per
// line (Redis INFO, Prometheus text), in seconds.
func sumFields(text, sep string, fields ...string) (time.Duration, error) {
	var total float64
	found := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		for _, f := range fields {
			v, ok := strings.CutPrefix(line, f+sep)
			if !ok {
				continue
			}
			x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %v", f, err)
			}
			total += x
			found++
		}
	}
	if found != len(fields) {
		return 0, fmt.Errorf("found %d of the fields %v", found, fields)
	}
	return time.Duration(total * float64(time.Second)), nil
}

// loopback reports whether the store address addr (a URL or host:port)
// names this machine.
func loopback(addr string) bool {
	host := addr
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		host = u.Host
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// procCPU sums the user and system time of every process whose command
// name is one of names, from /proc (Linux). Processes that end between
// two readings take their time with them, so a server that forks per
// connection (PostgreSQL) must keep its connections open across a run,
// as the benchmark's pools do.
func procCPU(names []string) (time.Duration, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		return 0, fmt.Errorf("no /proc to read")
	}
	var total time.Duration
	found := false
	for _, p := range stats {
		comm, d, err := statCPU(p)
		if err != nil || !slices.Contains(names, comm) {
			continue
		}
		total += d
		found = true
	}
	if !found {
		return 0, fmt.Errorf("no process named %v", names)
	}
	return total, nil
}

// statCPU reads a /proc/<pid>/stat file: the process's command name and
// its user and system time.
func statCPU(path string) (comm string, cpu time.Duration, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0, err
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, fmt.Errorf("%s: no command name", path)
	}
	comm = s[open+1 : end]
	f := strings.Fields(s[end+1:])
	// After the command: state, ppid, ... utime is field 14 of the
	// whole line, the 12th after the command.
	if len(f) < 13 {
		return comm, 0, fmt.Errorf("%s: too few fields", path)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := cmpErr(err1, err2); err != nil {
		return comm, 0, fmt.Errorf("%s: %w", path, err)
	}
	// The kernel's USER_HZ is 100 on every Linux this runs on.
	return comm, time.Duration(u+st) * (time.Second / 100), nil
}
