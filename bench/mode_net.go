package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// netSetting is one link the net mode measures over.
type netSetting struct {
	rtt     time.Duration // the round-trip delay the proxy adds
	proxied bool          // through the proxy process; false: straight to the store
}

func (s netSetting) String() string {
	switch {
	case !s.proxied:
		return "loopback"
	case s.rtt == 0:
		return "proxy, no delay"
	}
	return fmtRTT(s.rtt) + " RTT"
}

// fmtRTT prints 500µs as "0.5 ms".
func fmtRTT(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64) + " ms"
}

// parseRTTList parses -rtt-list: "loopback" (or 0) for no proxy, "proxy"
// for the proxy with no delay, or a round-trip time such as 0.5ms.
func parseRTTList(s string) ([]netSetting, error) {
	var out []netSetting
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		var st netSetting
		switch f {
		case "":
			continue
		case "loopback", "0":
		case "proxy":
			st.proxied = true
		default:
			d, err := time.ParseDuration(f)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("-rtt-list: %q is not loopback, proxy or a positive duration such as 0.5ms", f)
			}
			st = netSetting{rtt: d, proxied: true}
		}
		if !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-rtt-list names no setting")
	}
	return out, nil
}

// parseCounts parses a comma-separated list of positive numbers.
func parseCounts(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not a positive number", flagName, f)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s names no number", flagName)
	}
	return out, nil
}

// netOps are the operations the net mode measures, in table order.
var netOps = []string{"cycle", "renew", "busy"}

// comparedPeer is the peer the net mode's summary compares lease with,
// per store and operation: the simplest thing people use today.
func comparedPeer(kind, op string) string {
	switch kind {
	case kindRedis:
		return "bsm/redislock"
	case kindPostgres, kindMySQL:
		return "row floor (upsert + fenced update)"
	case kindEtcd:
		if op == "renew" {
			return "keep-alive on an open stream (granted lease)"
		}
		return "concurrency.Mutex (on a Session)"
	}
	return ""
}

// shortPeer names a compared peer in the summary's header.
func shortPeer(kind, op string) string {
	switch kind {
	case kindRedis:
		return "redislock"
	case kindPostgres, kindMySQL:
		return "row floor"
	case kindEtcd:
		if op == "renew" {
			return "keep-alive"
		}
		return "Mutex"
	}
	return "peer"
}

// netKey is one cell of the summary.
type netKey struct {
	setting netSetting
	workers int
	kind    string
	op      string
}

// netCell is lease and its compared peer in one cell.
type netCell struct {
	lease, peer *result
	err         error // the store could not be measured
}

// runNet measures cycle, renew and busy at every -workers-list count
// over every -rtt-list link: the stores behind a delaying proxy in a
// child process (see proxy_delay.go), lease beside its peers in
// interleaved rounds as cycle, renew and busy do. It returns the summary
// (the ratio to the compared peer per store and operation, a row per
// link and worker count) and the detail (both rates of every pair).
func runNet(ctx context.Context, cfg config, versions map[string]string, progress func(string)) []*table {
	summary := &table{
		title: fmt.Sprintf("net: lease/peer ops/s over an emulated link (a delaying TCP proxy; median of %s of %s); >1 means lease is faster",
			plural(cfg.rounds, "round"), cfg.dur),
	}
	detail := &table{
		title: "net, in detail: ops/s of lease and each peer, per link and worker count; ratio = lease/peer",
		cols:  []string{"link", "workers", "store", "operation", "lease", "peer", "ratio"},
	}
	cells := map[netKey]netCell{}
	labels := map[string]string{}
	for _, st := range cfg.netRTTs {
		if ctx.Err() != nil {
			break
		}
		var pp *proxyProcess
		if st.proxied {
			var err error
			if pp, err = startNetProxy(cfg.targets, st.rtt/2); err != nil {
				summary.note("%s: %s", st, short(err))
				continue
			}
		}
		for wi, workers := range cfg.netWorkers {
			if ctx.Err() != nil {
				break
			}
			blk := startBlock(pp)
			for _, tg := range cfg.targets {
				if ctx.Err() != nil {
					break
				}
				o := connOpts{pool: 2 * workers}
				if pp != nil {
					o.via = pp.via
				}
				c, err := connectFor(ctx, tg, o, versions)
				if err != nil {
					for _, op := range netOps {
						cells[netKey{st, workers, tg.kind, op}] = netCell{err: err}
					}
					summary.note("%s, %s: %s", st, plural(workers, "worker"), short(err))
					continue
				}
				labels[tg.kind] = c.label
				if wi == 0 {
					summary.note("%s", probeNote(ctx, c, st))
				}
				for _, op := range netOps {
					if ctx.Err() != nil {
						break
					}
					cells[netKey{st, workers, tg.kind, op}] = netMeasure(ctx, cfg, c, st, workers, op, detail, progress)
				}
				c.close()
			}
			summary.note("%s, %s: %s", st, plural(workers, "worker"), blk.end())
		}
		if pp != nil {
			pp.Close()
		}
	}
	netSummary(summary, cfg, cells, labels)
	return []*table{summary, detail}
}

// startNetProxy starts the proxy process for every address the targets
// name.
func startNetProxy(targets []target, oneWay time.Duration) (*proxyProcess, error) {
	var addrs []string
	for _, tg := range targets {
		as, err := targetAddrs(tg)
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			if !slices.Contains(addrs, a) {
				addrs = append(addrs, a)
			}
		}
	}
	return startProxyProcess(addrs, oneWay)
}

// netMeasure measures lease and its peers (only the compared one unless
// -all-peers) for one operation on c, adds the detail's rows, and
// returns the summary's cell.
func netMeasure(ctx context.Context, cfg config, c *storeConn, st netSetting, workers int, op string, detail *table, progress func(string)) netCell {
	want := comparedPeer(c.kind, op)
	var cs []contender
	for i, m := range storeImpls(c, cfg.ttl) {
		if i > 0 && !cfg.allPeers && m.name != want {
			continue
		}
		if ct, ok := contenderFor(m, op); ok {
			cs = append(cs, ct)
		}
	}
	label := fmt.Sprintf("%s-%s-w%d-%s", c.kind, strings.ReplaceAll(st.String(), " ", ""), workers, op)
	res := measure(ctx, label, cs, workers, cfg.rounds, cfg.dur, nil, progress)
	cell := netCell{lease: &res[0]}
	for i := range res {
		r := &res[i]
		if r.c.impl == want {
			cell.peer = r
		}
		detail.note("%s %s, %s: %s", c.label, r.c.impl, opTitles[op], r.c.perOp)
		if r.err != nil {
			detail.note("%s %s, %s, %s, %s: %d failed; first error: %s", st, plural(workers, "worker"), c.label, r.c.impl, opTitles[op], r.failed, short(r.err))
		}
		if i > 0 {
			detail.add(st.String(), strconv.Itoa(workers), c.label, opTitles[op], cell.leaseText(), r.c.impl+": "+cell2(r), ratio(res[0].opsPerS, r.opsPerS))
		}
	}
	return cell
}

func (c netCell) leaseText() string { return cell2(c.lease) }

func cell2(r *result) string {
	if r == nil {
		return "—"
	}
	return cell(*r)
}

// netSummary fills the summary: a column per store and operation, a row
// per worker count and link, in the order (workers, then link).
func netSummary(t *table, cfg config, cells map[netKey]netCell, labels map[string]string) {
	t.cols = []string{"link, workers"}
	for _, tg := range cfg.targets {
		label := cmpOr(labels[tg.kind], tg.kind)
		for _, op := range netOps {
			t.cols = append(t.cols, fmt.Sprintf("%s %s vs %s", label, op, shortPeer(tg.kind, op)))
		}
	}
	for _, workers := range cfg.netWorkers {
		for _, st := range cfg.netRTTs {
			row := []string{fmt.Sprintf("%s, %s", st, plural(workers, "worker"))}
			filled := false
			for _, tg := range cfg.targets {
				for _, op := range netOps {
					c, ok := cells[netKey{st, workers, tg.kind, op}]
					switch {
					case !ok:
						row = append(row, "")
					case c.err != nil || c.lease == nil || c.peer == nil:
						row = append(row, "error")
						filled = true
					default:
						row = append(row, ratio(c.lease.opsPerS, c.peer.opsPerS))
						filled = true
					}
				}
			}
			if filled {
				t.add(row...)
			}
		}
	}
	for _, tg := range cfg.targets {
		for _, op := range netOps {
			t.note("%s %s: lease against %s", cmpOr(labels[tg.kind], tg.kind), op, comparedPeer(tg.kind, op))
		}
	}
}
