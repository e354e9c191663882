package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"
)

// modes in the order "all" runs them.
var allModes = []string{"cycle", "renew", "busy", "contention", "rtt", "scale", "handoff"}

// extraModes are modes that "all" leaves out: net repeats cycle, renew
// and busy over emulated links and takes long.
var extraModes = []string{"net"}

// config is the command line.
type config struct {
	targets  []target
	modes    []string
	flags    []string // the other flags set, for the report's command line
	markdown bool
	quiet    bool

	workers int
	rounds  int
	dur     time.Duration
	ttl     time.Duration

	contenders int
	hold       time.Duration

	rttReps int
	batch   int
	idle    time.Duration

	scaleN    []int
	scaleTTL  time.Duration
	scaleHold time.Duration
	scalePool int

	waiters     int
	handoffHold time.Duration
	waitLimit   time.Duration

	netRTTs    []netSetting
	netWorkers []int
	allPeers   bool
}

func main() {
	if code, ok := proxyChild(); ok {
		os.Exit(code)
	}
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

const usage = `Usage: go run . [flags]   (in the bench directory of github.com/leasekit/lease)

Measures lease beside the locks people use today, on your own servers, in
one run: interleaved rounds (every contender takes its turn in each round,
in a rotating order), the median of the rounds, and ratios arranged so that
a ratio above 1 favours lease. Name at least one store:

  go run . -redis redis://127.0.0.1:6379/0 \
      -postgres 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
      -mysql mysql://root@127.0.0.1:3306/test -etcd 127.0.0.1:2379 -mode all

Every key and table it makes has a random "leasebench" prefix and is removed
at the end; it never flushes or restarts anything. Modes (-mode, comma
separated, or all):

  cycle       Acquire+Release of a free name, -workers workers on distinct names
  renew       Renew of a held tenure
  busy        Acquire of a name another owner holds
  contention  -contenders workers on one name, each acquire, hold -hold, release;
              checks that at most one holder exists at any time (and that fenced
              writes never go backwards)
  rtt         round trips per operation (through a counting TCP proxy; RPCs on etcd)
  scale       -scale-n concurrent lease.Run jobs on one Locker (ttl -scale-ttl,
              each holding -scale-hold): kept/lost/errors, goroutines, heap,
              memory per lease, round trips per renewal sweep
  handoff     -waiters waiters on one name; latency from the holder's release to
              the next holder's start, and store operations per handoff
  net         (not in all) cycle, renew and busy at each of -workers-list over
              each link of -rtt-list: the stores behind a TCP proxy (in a child
              process) that delays every byte by half the round trip each way;
              prints the measured round trip, the proxy's CPU and a table of
              ratios per store and link. For a short run:
              -mode net -workers-list 1,8 -rtt-list 0.5ms -time 1s -rounds 3

Peers: bsm/redislock, go-redsync/redsync v4 (one pool), a raw Redis floor
(SET NX PX + owner-checked scripts), a SQL row floor (one upsert + one fenced
update), PostgreSQL/MySQL session locks (for reference: not leases), etcd's
concurrency.Mutex and lease keep-alives. What each sends per operation is
printed under each table.

Flags:
`

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	var cfg config
	var redisURL, pgURL, myURL, etcdEPs, modes, scaleN, rttList, workersList string
	fs.StringVar(&redisURL, "redis", "", "Redis `URL`, e.g. redis://127.0.0.1:6379/0")
	fs.StringVar(&pgURL, "postgres", "", "PostgreSQL `URL`; query parameters go to pgx (e.g. sslmode=disable, synchronous_commit=off for both sides)")
	fs.StringVar(&myURL, "mysql", "", "MySQL or MariaDB `URL`, e.g. mysql://root@127.0.0.1:3306/test")
	fs.StringVar(&etcdEPs, "etcd", "", "etcd `endpoints`, host:port[,host:port]")
	fs.StringVar(&modes, "mode", "cycle,renew,busy", "`modes` to run, comma separated: "+strings.Join(allModes, ",")+" or all, and "+strings.Join(extraModes, ","))
	fs.BoolVar(&cfg.markdown, "markdown", false, "print markdown tables (for docs/performance.md)")
	fs.BoolVar(&cfg.quiet, "q", false, "print no progress to stderr")
	fs.IntVar(&cfg.workers, "workers", 8, "concurrent workers for cycle, renew and busy, each on its own name")
	fs.IntVar(&cfg.rounds, "rounds", 5, "rounds per measurement; the median is reported")
	fs.DurationVar(&cfg.dur, "time", time.Second, "how long each contender runs in each round")
	fs.DurationVar(&cfg.ttl, "ttl", 30*time.Second, "ttl of the tenures in cycle, renew, busy, contention and rtt")
	fs.IntVar(&cfg.contenders, "contenders", 8, "workers on the one name in contention")
	fs.DurationVar(&cfg.hold, "hold", time.Millisecond, "how long each contention holder holds")
	fs.IntVar(&cfg.rttReps, "rtt-reps", 5, "repetitions of each operation in rtt (the median is reported)")
	fs.IntVar(&cfg.batch, "batch", 500, "tenures in rtt's batch renewal")
	fs.DurationVar(&cfg.idle, "idle", 1500*time.Millisecond, "idle time before rtt's \"renew after idle\"")
	fs.StringVar(&scaleN, "scale-n", "10000", "comma-separated numbers of concurrent Run jobs in scale")
	fs.DurationVar(&cfg.scaleTTL, "scale-ttl", 6*time.Second, "ttl of scale's jobs (they renew every ttl/3)")
	fs.DurationVar(&cfg.scaleHold, "scale-hold", 20*time.Second, "how long each of scale's jobs holds its lease")
	fs.IntVar(&cfg.scalePool, "scale-pool", 32, "SQL pool size (connections) in scale")
	fs.IntVar(&cfg.waiters, "waiters", 10, "waiters on the one name in handoff")
	fs.DurationVar(&cfg.handoffHold, "handoff-hold", 5*time.Millisecond, "how long each holder in handoff holds before releasing")
	fs.DurationVar(&cfg.waitLimit, "wait", 60*time.Second, "how long a waiter in handoff waits at most")
	fs.StringVar(&rttList, "rtt-list", "loopback,0.5ms,2ms", "net: the links, comma separated: loopback (no proxy), proxy (the proxy, no delay) or a round-trip time the proxy adds")
	fs.StringVar(&workersList, "workers-list", "1,8,64", "net: the worker counts, comma separated")
	fs.BoolVar(&cfg.allPeers, "all-peers", false, "net: measure every peer, not only the one the summary compares with")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "redis", "postgres", "mysql", "etcd", "mode", "markdown", "q":
		default:
			cfg.flags = append(cfg.flags, "-"+f.Name+"="+f.Value.String())
		}
	})
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q (see -h)", fs.Arg(0))
	}
	for _, t := range []target{{kindRedis, redisURL}, {kindPostgres, pgURL}, {kindMySQL, myURL}, {kindEtcd, etcdEPs}} {
		if t.addr != "" {
			cfg.targets = append(cfg.targets, t)
		}
	}
	if len(cfg.targets) == 0 {
		return cfg, errors.New("name at least one store: -redis, -postgres, -mysql or -etcd (see -h)")
	}
	for _, m := range strings.Split(modes, ",") {
		m = strings.TrimSpace(m)
		switch {
		case m == "all":
			cfg.modes = append(cfg.modes, allModes...)
		case slices.Contains(allModes, m), slices.Contains(extraModes, m):
			cfg.modes = append(cfg.modes, m)
		case m != "":
			return cfg, fmt.Errorf("unknown mode %q (want %s, all or %s)", m, strings.Join(allModes, ", "), strings.Join(extraModes, ", "))
		}
	}
	var uniq []string
	for _, m := range cfg.modes {
		if !slices.Contains(uniq, m) {
			uniq = append(uniq, m)
		}
	}
	cfg.modes = uniq
	if len(cfg.modes) == 0 {
		return cfg, errors.New("-mode names no mode")
	}
	for _, s := range strings.Split(scaleN, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("-scale-n: %q is not a positive number", s)
		}
		cfg.scaleN = append(cfg.scaleN, n)
	}
	var err error
	if cfg.netRTTs, err = parseRTTList(rttList); err != nil {
		return cfg, err
	}
	if cfg.netWorkers, err = parseCounts("-workers-list", workersList); err != nil {
		return cfg, err
	}
	for name, v := range map[string]int{"-workers": cfg.workers, "-rounds": cfg.rounds, "-contenders": cfg.contenders, "-rtt-reps": cfg.rttReps, "-batch": cfg.batch, "-waiters": cfg.waiters, "-scale-pool": cfg.scalePool} {
		if v < 1 {
			return cfg, fmt.Errorf("%s must be at least 1", name)
		}
	}
	for name, v := range map[string]time.Duration{"-time": cfg.dur, "-ttl": cfg.ttl, "-scale-ttl": cfg.scaleTTL, "-scale-hold": cfg.scaleHold, "-wait": cfg.waitLimit} {
		if v <= 0 {
			return cfg, fmt.Errorf("%s must be positive", name)
		}
	}
	if cfg.ttl < 2*time.Second || cfg.scaleTTL < time.Second {
		return cfg, errors.New("-ttl must be at least 2s and -scale-ttl at least 1s (etcd grants whole seconds)")
	}
	return cfg, nil
}

// run runs the modes and writes the report to stdout; progress and
// errors that do not stop the run go to stderr.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	progress := func(string) {}
	if !cfg.quiet {
		progress = func(s string) { fmt.Fprintf(stderr, "bench: %s: %s\n", time.Now().Format("15:04:05"), s) }
	}
	r := &report{}
	start := time.Now()
	r.header = append(r.header,
		fmt.Sprintf("lease benchmark, %s", start.UTC().Format("2006-01-02 15:04 UTC")),
		fmt.Sprintf("machine: %s", machine()),
		fmt.Sprintf("load average at start: %s", loadAvg()),
		fmt.Sprintf("modes: %s", strings.Join(cfg.modes, ",")))
	versions := map[string]string{}
	for _, mode := range cfg.modes {
		if ctx.Err() != nil {
			break
		}
		progress("mode " + mode)
		var t *table
		switch mode {
		case "net":
			r.tables = append(r.tables, runNet(ctx, cfg, versions, progress)...)
			continue
		case "cycle", "renew", "busy":
			t = runOps(ctx, cfg, mode, versions, progress)
		case "contention":
			t = runContention(ctx, cfg, versions, progress)
		case "rtt":
			t = runRTT(ctx, cfg, versions, progress)
		case "scale":
			t = runScale(ctx, cfg, versions, progress)
		case "handoff":
			t = runHandoff(ctx, cfg, versions, progress)
		}
		r.tables = append(r.tables, t)
	}
	var vs []string
	for _, t := range cfg.targets {
		if v, ok := versions[t.kind]; ok {
			vs = append(vs, v)
		}
	}
	if len(vs) > 0 {
		r.header = append(r.header, "servers: "+strings.Join(vs, ", "))
	}
	r.footer = append(r.footer,
		fmt.Sprintf("load average at end: %s (took %s)", loadAvg(), time.Since(start).Round(time.Second)),
		"command: go run . "+strings.Join(commandLine(cfg), " "))
	r.write(stdout, cfg.markdown)
	return ctx.Err()
}

// commandLine is the run's command line with the servers' URLs left out
// (they can hold passwords).
func commandLine(cfg config) []string {
	var out []string
	for _, t := range cfg.targets {
		out = append(out, "-"+t.kind+" ...")
	}
	return append(append(out, "-mode", strings.Join(cfg.modes, ",")), cfg.flags...)
}

// connectFor connects to t for a mode, and records the server's version.
func connectFor(ctx context.Context, t target, o connOpts, versions map[string]string) (*storeConn, error) {
	c, err := connect(ctx, t, o)
	if err != nil {
		return nil, err
	}
	versions[t.kind] = c.label + " " + c.version
	return c, nil
}
