package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// The benchmarks below compare the Locker, side by side in one run, with
// what etcd's own client offers for the same job (issue 10):
//
//	cycle   Acquire + Release of a free name   vs concurrency.Mutex Lock + Unlock
//	renew   Renew of a held tenure             vs one keep-alive on an existing
//	                                              LeaseKeepAlive stream (the floor),
//	                                              and clientv3's KeepAliveOnce
//	busy    Acquire of a name another holds    vs concurrency.Mutex TryLock of a
//	                                              locked mutex
//
// Each runs benchWorkers goroutines for a round of a fixed duration on one
// side, then on the other, alternating which goes first, for several
// rounds; it reports the median ratio of the Locker's throughput to the
// peer's, and the spread. Run them with
//
//	go test -run '^$' -bench VsPeer -benchtime 1x ./backend/etcd/
//
// (LEASE_TEST_ETCD for a real server; LEASE_BENCH_ROUNDS and
// LEASE_BENCH_ROUND, a duration, change the rounds), and say the load
// average (uptime) next to the numbers: they are ratios measured on a
// shared machine, not absolute speeds.

const benchWorkers = 8

// benchSide is one side of a comparison: prepare returns, for worker w,
// the operation to repeat and what to do when the round is over.
type benchSide struct {
	name    string
	prepare func(b *testing.B, w int) (op func(ctx context.Context) error, done func())
}

func benchRounds() (int, time.Duration) {
	rounds, round := 7, time.Second
	if v, err := strconv.Atoi(os.Getenv("LEASE_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	if v, err := time.ParseDuration(os.Getenv("LEASE_BENCH_ROUND")); err == nil && v > 0 {
		round = v
	}
	return rounds, round
}

// runRound runs s with benchWorkers workers for d and returns the
// operations per second.
func runRound(b *testing.B, s benchSide, d time.Duration) float64 {
	b.Helper()
	ops := make([]func(context.Context) error, benchWorkers)
	dones := make([]func(), benchWorkers)
	for w := range benchWorkers {
		ops[w], dones[w] = s.prepare(b, w)
	}
	defer func() {
		for _, done := range dones {
			if done != nil {
				done()
			}
		}
	}()
	var n atomic.Int64
	var failed atomic.Value
	ctx := context.Background()
	stop := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range benchWorkers {
		wg.Go(func() {
			for time.Now().Before(stop) {
				octx, cancel := context.WithTimeout(ctx, 10*time.Second)
				err := ops[w](octx)
				cancel()
				if err != nil {
					failed.CompareAndSwap(nil, fmt.Errorf("%s: %w", s.name, err))
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return float64(n.Load()) / time.Since(start).Seconds()
}

// compare runs ours against each peer in interleaved rounds and reports
// the median ratio ours/peer, with its spread.
func compare(b *testing.B, ours benchSide, peers ...benchSide) {
	rounds, round := benchRounds()
	sides := append([]benchSide{ours}, peers...)
	rates := make([][]float64, len(sides))
	// One untimed warm-up round each: pools, streams, sessions.
	for _, s := range sides {
		runRound(b, s, round/4)
	}
	for r := range rounds {
		order := slices.Clone(sides)
		idx := make([]int, len(sides))
		for i := range idx {
			idx[i] = i
		}
		if r%2 == 1 {
			slices.Reverse(order)
			slices.Reverse(idx)
		}
		for k, s := range order {
			rates[idx[k]] = append(rates[idx[k]], runRound(b, s, round))
		}
	}
	b.ReportMetric(median(rates[0]), ours.name+"-ops/s")
	for i, p := range peers {
		ratios := make([]float64, rounds)
		for r := range rounds {
			ratios[r] = rates[0][r] / rates[i+1][r]
		}
		slices.Sort(ratios)
		b.ReportMetric(median(rates[i+1]), p.name+"-ops/s")
		b.ReportMetric(median(ratios), "x-"+p.name)
		b.Logf("%s / %s: median %.2f×, range %.2f–%.2f× over %d rounds of %s (%s %.0f ops/s, %s %.0f ops/s, medians)",
			ours.name, p.name, median(ratios), ratios[0], ratios[len(ratios)-1], rounds, round,
			ours.name, median(rates[0]), p.name, median(rates[i+1]))
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// benchTTL is the ttl of every tenure, session and lease in the
// comparisons: long enough that nothing expires during a run.
const benchTTL = 30 * time.Second

// benchLocker returns a Locker with its own client, as a program has.
func benchLocker(b *testing.B) *Locker {
	b.Helper()
	return mustNew(b, newClient(b, testEndpoints, nil), WithPrefix(randomPrefix()))
}

// mutexSide is concurrency.Mutex with a session per worker, made once.
func mutexSides(b *testing.B) (lockUnlock, tryLockBusy benchSide) {
	client := newClient(b, testEndpoints, nil)
	prefix := randomPrefix()
	sessions := make([]*concurrency.Session, benchWorkers)
	for w := range sessions {
		s, err := concurrency.NewSession(client, concurrency.WithTTL(int(benchTTL.Seconds())))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		sessions[w] = s
	}
	// The busy mutex is locked by a session of its own.
	holder, err := concurrency.NewSession(client, concurrency.WithTTL(int(benchTTL.Seconds())))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = holder.Close() })
	busy := prefix + "busy"
	if err := concurrency.NewMutex(holder, busy).Lock(context.Background()); err != nil {
		b.Fatal(err)
	}
	lockUnlock = benchSide{"mutex", func(b *testing.B, w int) (func(context.Context) error, func()) {
		m := concurrency.NewMutex(sessions[w], prefix+"cycle-"+strconv.Itoa(w))
		return func(ctx context.Context) error {
			if err := m.Lock(ctx); err != nil {
				return err
			}
			return m.Unlock(ctx)
		}, nil
	}}
	tryLockBusy = benchSide{"trylock", func(b *testing.B, w int) (func(context.Context) error, func()) {
		m := concurrency.NewMutex(sessions[w], busy)
		return func(ctx context.Context) error {
			if err := m.TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
				return fmt.Errorf("TryLock of a locked mutex = %v; want ErrLocked", err)
			}
			return nil
		}, nil
	}}
	return lockUnlock, tryLockBusy
}

// BenchmarkCycleVsPeer: Acquire + Release of a free name against
// concurrency.Mutex Lock + Unlock.
func BenchmarkCycleVsPeer(b *testing.B) {
	l := benchLocker(b)
	mutex, _ := mutexSides(b)
	ours := benchSide{"lease", func(b *testing.B, w int) (func(context.Context) error, func()) {
		name, owner := "cycle-"+strconv.Itoa(w), "owner-"+strconv.Itoa(w)
		return func(ctx context.Context) error {
			held, err := l.Acquire(ctx, name, owner, benchTTL)
			if err != nil {
				return err
			}
			return l.Release(ctx, held)
		}, nil
	}}
	compare(b, ours, mutex)
}

// BenchmarkBusyVsPeer: Acquire of a name another owner holds against
// TryLock of a locked concurrency.Mutex.
func BenchmarkBusyVsPeer(b *testing.B) {
	l := benchLocker(b)
	_, trylock := mutexSides(b)
	if _, err := l.Acquire(context.Background(), "busy", "holder", benchTTL); err != nil {
		b.Fatal(err)
	}
	ours := benchSide{"lease", func(b *testing.B, w int) (func(context.Context) error, func()) {
		owner := "owner-" + strconv.Itoa(w)
		return func(ctx context.Context) error {
			if _, err := l.Acquire(ctx, "busy", owner, benchTTL); !errors.Is(err, lease.ErrHeld) {
				return fmt.Errorf("Acquire of a held name = %v; want ErrHeld", err)
			}
			return nil
		}, nil
	}}
	compare(b, ours, trylock)
}

// BenchmarkRenewVsPeer: Renew of a held tenure against one keep-alive
// request on an open LeaseKeepAlive stream (the least a renewal of an
// etcd lease can cost), and against clientv3's KeepAliveOnce (a new
// stream per call).
func BenchmarkRenewVsPeer(b *testing.B) {
	l := benchLocker(b)
	held := make([]lease.Lease, benchWorkers)
	for w := range held {
		var err error
		held[w], err = l.Acquire(context.Background(), "renew-"+strconv.Itoa(w), "owner", benchTTL)
		if err != nil {
			b.Fatal(err)
		}
	}
	ours := benchSide{"lease", func(b *testing.B, w int) (func(context.Context) error, func()) {
		return func(ctx context.Context) error {
			got, err := l.Renew(ctx, held[w], benchTTL)
			if err == nil {
				held[w] = got
			}
			return err
		}, nil
	}}
	client := newClient(b, testEndpoints, nil)
	ids := make([]clientv3.LeaseID, benchWorkers)
	for w := range ids {
		g, err := client.Grant(context.Background(), int64(benchTTL.Seconds()))
		if err != nil {
			b.Fatal(err)
		}
		ids[w] = g.ID
		b.Cleanup(func() { _, _ = client.Revoke(context.Background(), g.ID) })
	}
	stream := benchSide{"keepalive-stream", func(b *testing.B, w int) (func(context.Context) error, func()) {
		ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
		s, err := pb.NewLeaseClient(client.ActiveConnection()).LeaseKeepAlive(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return func(context.Context) error {
				if err := s.Send(&pb.LeaseKeepAliveRequest{ID: int64(ids[w])}); err != nil {
					return err
				}
				r, err := s.Recv()
				if err == nil && r.TTL <= 0 {
					err = errors.New("lease not found")
				}
				return err
			}, func() {
				cancel()
			}
	}}
	once := benchSide{"keepaliveonce", func(b *testing.B, w int) (func(context.Context) error, func()) {
		return func(ctx context.Context) error {
			_, err := client.KeepAliveOnce(ctx, ids[w])
			return err
		}, nil
	}}
	compare(b, ours, stream, once)
}
