package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// probes is how many trivial round trips probeNote times (after one
// untimed).
const probes = 20

// probeNote times trivial round trips to c's store (Redis PING, SELECT 1,
// a serializable etcd Get) over the setting's link, and says how their
// median compares with the delay the setting adds.
func probeNote(ctx context.Context, c *storeConn, st netSetting) string {
	what, probe := probeFor(c)
	var ds []time.Duration
	for i := range probes + 1 {
		t0 := time.Now()
		if err := probe(ctx); err != nil {
			return fmt.Sprintf("%s: %s %s: %s", st, c.label, what, short(err))
		}
		if i > 0 {
			ds = append(ds, time.Since(t0))
		}
	}
	slices.Sort(ds)
	added := "no proxy"
	if st.proxied {
		added = fmt.Sprintf("the proxy adds %s (%s each way)", ms(st.rtt), ms(st.rtt/2))
	}
	return fmt.Sprintf("%s: measured round trip, %s %s: median %s (min %s, max %s, %d probes); %s",
		st, c.label, what, ms(ds[len(ds)/2]), ms(ds[0]), ms(ds[len(ds)-1]), len(ds), added)
}

// probeFor is the trivial round trip on c's store.
func probeFor(c *storeConn) (string, func(context.Context) error) {
	switch c.kind {
	case kindRedis:
		return "PING", func(ctx context.Context) error { return c.redis.Ping(ctx).Err() }
	case kindPostgres, kindMySQL:
		return "SELECT 1", func(ctx context.Context) error {
			var one int
			return c.db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
		}
	case kindEtcd:
		key := c.etcdPrefix() + "probe"
		return "serializable Get", func(ctx context.Context) error {
			_, err := c.etcd.Get(ctx, key, clientv3.WithSerializable())
			return err
		}
	}
	return "nothing", func(context.Context) error { return nil }
}

// block measures one link and worker count of the net mode as a whole:
// the load average, and the CPU of this process and of the proxy's.
type block struct {
	pp       *proxyProcess
	t0       time.Time
	load0    string
	self0    time.Duration
	selfOK   bool
	proxy0   time.Duration
	proxyErr error
}

func startBlock(pp *proxyProcess) *block {
	b := &block{pp: pp, t0: time.Now(), load0: loadAvg()}
	b.self0, b.selfOK = selfCPU()
	if pp != nil {
		b.proxy0, b.proxyErr = pp.cpu()
	}
	return b
}

// end describes the block: its load averages, and the share of a CPU
// this process (lease, the peers, the drivers) and the proxy process
// kept busy.
func (b *block) end() string {
	el := time.Since(b.t0)
	share := func(d time.Duration) string {
		return fmt.Sprintf("%.2fs CPU in %s (%.0f%% of a CPU)", d.Seconds(), el.Round(100*time.Millisecond), 100*d.Seconds()/el.Seconds())
	}
	s := fmt.Sprintf("load average %s at start, %s at end", b.load0, loadAvg())
	if self1, ok := selfCPU(); ok && b.selfOK {
		s += "; this process (clients) " + share(self1-b.self0)
	}
	if b.pp != nil {
		proxy1, err := b.pp.cpu()
		if err = cmpErr(b.proxyErr, err); err != nil {
			s += "; proxy process CPU not measured (" + short(err) + ")"
		} else {
			s += "; proxy process " + share(proxy1-b.proxy0)
		}
	}
	return s
}
