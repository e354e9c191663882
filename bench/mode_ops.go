package main

import (
	"context"
	"fmt"
	"time"
)

// opTitles names the operation each of cycle, renew and busy measures.
var opTitles = map[string]string{
	"cycle": "acquire+release",
	"renew": "renew",
	"busy":  "busy acquire",
}

// storeImpls are lease and every peer on c's store.
func storeImpls(c *storeConn, ttl time.Duration) []impl {
	out := []impl{leaseImpl(c.locker, ttl)}
	switch c.kind {
	case kindRedis:
		out = append(out, redisImpls(c, ttl)...)
	case kindPostgres, kindMySQL:
		out = append(out, sqlImpls(c, ttl)...)
	case kindEtcd:
		out = append(out, etcdImpls(c, ttl)...)
	}
	return out
}

// runOps measures one of cycle, renew and busy on every store: lease and
// its peers on one shared client per store, cfg.workers workers each on
// its own name, interleaved rounds, median.
func runOps(ctx context.Context, cfg config, op string, versions map[string]string, progress func(string)) *table {
	t := &table{
		title: fmt.Sprintf("%s: %s, %d workers on distinct names, ops/s (median of %s of %s); ratio = lease/peer, >1 means lease is faster",
			op, opTitles[op], cfg.workers, plural(cfg.rounds, "round"), cfg.dur),
		cols: compareCols,
	}
	for _, tg := range cfg.targets {
		// The pool fits every worker twice: a busy session lock pins a
		// holder's connection and a worker's.
		c, err := connectFor(ctx, tg, connOpts{pool: 2 * cfg.workers}, versions)
		if err != nil {
			t.add(tg.kind, opTitles[op], "error", "", "")
			t.note("%s", short(err))
			continue
		}
		var cs []contender
		for _, m := range storeImpls(c, cfg.ttl) {
			if ct, ok := contenderFor(m, op); ok {
				cs = append(cs, ct)
			}
		}
		cpu := serverCPUMeter(c, tg.addr)
		res := measure(ctx, c.kind+"-"+op, cs, cfg.workers, cfg.rounds, cfg.dur, cpu, progress)
		compareRows(t, c, opTitles[op], res)
		cpuNotes(t, c, opTitles[op], cpu, res)
		c.close()
	}
	return t
}

// compareRows adds one row per peer of res[0] (lease), and the notes that
// say what each sends.
func compareRows(t *table, c *storeConn, opTitle string, res []result) {
	lease := res[0]
	for _, r := range res[1:] {
		t.add(c.label, opTitle, cell(lease), r.c.impl+": "+cell(r), ratio(lease.opsPerS, r.opsPerS))
	}
	if len(res) == 1 {
		t.add(c.label, opTitle, cell(lease), "—", "—")
	}
	for _, r := range res {
		t.note("%s %s, %s: %s", c.label, r.c.impl, opTitle, r.c.perOp)
		if r.err != nil {
			t.note("%s %s, %s: %d failed; first error: %s", c.label, r.c.impl, opTitle, r.failed, short(r.err))
		}
	}
}

// cell formats a result's rate, with its failures.
func cell(r result) string {
	if r.skipped {
		return "error"
	}
	s := rate(r.opsPerS)
	if r.failed > 0 {
		s += fmt.Sprintf(" (%d failed)", r.failed)
	}
	return s
}

// cpuNotes adds, under the table, the CPU time per operation of each
// side of res, in this process and in the server: which side a ratio is
// bound by, and whether lease costs more per operation or only waits
// more.
func cpuNotes(t *table, c *storeConn, opTitle string, cpu *cpuMeter, res []result) {
	for _, r := range res {
		if r.skipped {
			continue
		}
		t.note("%s %s, %s: CPU %s", c.label, r.c.impl, opTitle, r.cpu)
	}
	t.note("%s server CPU: %s", c.label, cpu.what)
}
