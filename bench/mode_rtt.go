package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/leasekit/lease"
)

// counter measures what one call sends: the store's round trips (or
// etcd's RPCs) between before and after, after letting background work
// that the call started (etcd's revocations) land.
type counter struct {
	c      *storeConn
	settle time.Duration
}

func (k counter) measure(f func() error) (int64, error) {
	time.Sleep(k.settle)
	before := k.c.count()
	err := f()
	time.Sleep(k.settle)
	return k.c.count() - before, err
}

// counts is one operation's counts over its repetitions.
type counts []int64

func (cs counts) String() string {
	if len(cs) == 0 {
		return "—"
	}
	s := slices.Clone(cs)
	slices.Sort(s)
	med := s[len(s)/2]
	if s[0] == s[len(s)-1] {
		return fmt.Sprint(med)
	}
	return fmt.Sprintf("%d (%d–%d)", med, s[0], s[len(s)-1])
}

func (cs counts) median() float64 {
	if len(cs) == 0 {
		return 0
	}
	s := slices.Clone(cs)
	slices.Sort(s)
	return float64(s[len(s)/2])
}

// runRTT counts round trips per operation: lease's operations one by one
// (opened by the backend's own URL opener, as lease.Open does, through a
// counting proxy; etcd's RPCs are counted by a gRPC interceptor), and
// lease beside each peer for cycle, renew and busy.
func runRTT(ctx context.Context, cfg config, versions map[string]string, progress func(string)) *table {
	t := &table{
		title: fmt.Sprintf("rtt: round trips per operation (median of %d; Redis and SQL: turns through a counting TCP proxy; etcd: RPCs and stream messages sent); ratio = peer/lease, >1 means lease sends fewer", cfg.rttReps),
		cols:  compareCols,
	}
	for _, tg := range cfg.targets {
		c, err := connectFor(ctx, tg, connOpts{proxy: true, leaseURL: true, pool: 2}, versions)
		if err != nil {
			t.add(tg.kind, "rtt", "error", "", "")
			t.note("%s", short(err))
			continue
		}
		progress(c.kind + " rtt")
		if c.openNote != "" {
			t.note("%s: %s", c.label, c.openNote)
		}
		k := counter{c: c, settle: 5 * time.Millisecond}
		if c.kind == kindEtcd {
			k.settle = 50 * time.Millisecond
		}
		leaseRTT(ctx, cfg, t, c, k)
		peerRTT(ctx, cfg, t, c, k)
		c.close()
	}
	return t
}

// leaseRTT counts each of lease's operations.
func leaseRTT(ctx context.Context, cfg config, t *table, c *storeConn, k counter) {
	l := c.locker
	ops := []string{"acquire, new name", "acquire, re-entrant", "acquire, busy", "renew", "inspect, held", "release", "acquire, released name", "inspect, free", "renew after idle"}
	got := map[string]counts{}
	var firstErr error
	rec := func(op string, f func() error) {
		n, err := k.measure(f)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", op, err)
			}
			return
		}
		got[op] = append(got[op], n)
	}
	for rep := range cfg.rttReps {
		name := fmt.Sprintf("rtt-%d", rep)
		owner, other := lease.NewOwner(), lease.NewOwner()
		var held lease.Lease
		rec("acquire, new name", func() (err error) { held, err = l.Acquire(ctx, name, owner, cfg.ttl); return err })
		rec("acquire, re-entrant", func() (err error) { held, err = l.Acquire(ctx, name, owner, cfg.ttl); return err })
		rec("acquire, busy", func() error { return wantHeld(l.Acquire(ctx, name, other, cfg.ttl)) })
		rec("renew", func() (err error) { held, err = l.Renew(ctx, held, cfg.ttl); return err })
		rec("inspect, held", func() error { _, err := l.Inspect(ctx, name); return err })
		rec("release", func() error { return l.Release(ctx, held) })
		rec("acquire, released name", func() (err error) { held, err = l.Acquire(ctx, name, owner, cfg.ttl); return err })
		_ = l.Release(ctx, held)
		rec("inspect, free", func() error { return wantNotHeld(l.Inspect(ctx, name)) })
		if rep < 2 {
			held, err := l.Acquire(ctx, name+"-idle", owner, cfg.ttl)
			if err == nil {
				time.Sleep(cfg.idle)
				rec("renew after idle", func() (err error) { held, err = l.Renew(ctx, held, cfg.ttl); return err })
				_ = l.Release(ctx, held)
			}
		}
	}
	for _, op := range ops {
		if op == "renew after idle" {
			t.add(c.label, fmt.Sprintf("renew after %s idle", cfg.idle), got[op].String(), "—", "—")
			continue
		}
		t.add(c.label, op, got[op].String(), "—", "—")
	}
	// A batch renewal of cfg.batch tenures, in one RenewBatch call.
	if br, ok := l.(batcher); ok {
		leases := make([]lease.Lease, 0, cfg.batch)
		ttls := make([]time.Duration, 0, cfg.batch)
		owner := lease.NewOwner()
		for i := range cfg.batch {
			held, err := l.Acquire(ctx, fmt.Sprintf("rtt-batch-%d", i), owner, cfg.ttl)
			if err != nil {
				firstErr = cmpErr(firstErr, fmt.Errorf("batch: acquire: %w", err))
				break
			}
			leases, ttls = append(leases, held), append(ttls, cfg.ttl)
		}
		var renewed int
		n, _ := k.measure(func() error {
			_, errs := br.RenewBatch(ctx, leases, ttls)
			for _, err := range errs {
				if err == nil {
					renewed++
				} else if firstErr == nil {
					firstErr = fmt.Errorf("batch renewal: %w", err)
				}
			}
			return nil
		})
		t.add(c.label, fmt.Sprintf("batch renewal of %d tenures (RenewBatch)", len(leases)), fmt.Sprintf("%d (%d renewed)", n, renewed), "—", "—")
		for _, ls := range leases {
			_ = l.Release(ctx, ls)
		}
	} else {
		t.add(c.label, "batch renewal", "no RenewBatch", "—", "—")
	}
	if firstErr != nil {
		t.note("%s lease: %s", c.label, short(firstErr))
	}
}

func wantHeld(_ lease.Lease, err error) error {
	if errors.Is(err, lease.ErrHeld) {
		return nil
	}
	if err == nil {
		return errors.New("acquired a held name")
	}
	return err
}

func wantNotHeld(_ lease.Lease, err error) error {
	if errors.Is(err, lease.ErrNotHeld) {
		return nil
	}
	if err == nil {
		return errors.New("a released name is still held")
	}
	return err
}

// peerRTT counts cycle, renew and busy for lease and each peer.
func peerRTT(ctx context.Context, cfg config, t *table, c *storeConn, k counter) {
	for _, op := range []string{"cycle", "renew", "busy"} {
		var leaseCounts counts
		for i, m := range storeImpls(c, cfg.ttl) {
			if m.does[op] == "" {
				continue
			}
			got, err := countOp(ctx, cfg, k, m, op, fmt.Sprintf("rtt-%s-%d", op, i))
			if i == 0 {
				leaseCounts = got
				continue
			}
			cellText := got.String()
			if err != nil {
				cellText = "error"
				t.note("%s %s, %s: %s", c.label, m.name, op, short(err))
			}
			t.add(c.label, opTitles[op], leaseCounts.String(), m.name+": "+cellText, ratio(got.median(), leaseCounts.median()))
			t.note("%s %s, %s: %s", c.label, m.name, opTitles[op], m.does[op])
		}
	}
}

// countOp counts one operation of m cfg.rttReps times.
func countOp(ctx context.Context, cfg config, k counter, m impl, op, name string) (counts, error) {
	var out counts
	h, err := m.open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	switch op {
	case "cycle":
		for range cfg.rttReps {
			n, err := k.measure(func() error {
				if err := mustTry(ctx, h); err != nil {
					return err
				}
				return h.release(ctx)
			})
			if err != nil {
				return out, err
			}
			out = append(out, n)
		}
	case "renew":
		if err := mustTry(ctx, h); err != nil {
			return nil, err
		}
		defer func() { _ = h.release(ctx) }()
		for range cfg.rttReps {
			n, err := k.measure(func() error { return h.renew(ctx) })
			if err != nil {
				return out, err
			}
			out = append(out, n)
		}
	case "busy":
		holder, err := m.open(ctx, name)
		if err != nil {
			return nil, err
		}
		defer holder.Close()
		if err := mustTry(ctx, holder); err != nil {
			return nil, err
		}
		defer func() { _ = holder.release(ctx) }()
		for range cfg.rttReps {
			n, err := k.measure(func() error {
				_, ok, err := h.try(ctx)
				if err == nil && ok {
					err = errors.New("acquired a held name")
				}
				return err
			})
			if err != nil {
				return out, err
			}
			out = append(out, n)
		}
	}
	return out, nil
}
