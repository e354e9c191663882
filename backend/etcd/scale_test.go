package etcdlease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// TestScale runs N concurrent lease.Run jobs on one Locker (issue 11) and
// reports how many kept their lease, lost it or failed, the requests one
// renewal sweep costs, and the goroutines and heap at the peak. It runs
// only when LEASE_ETCD_SCALE lists the Ns, e.g.
//
//	LEASE_ETCD_SCALE=100,1000,10000 go test -run TestScale -v -timeout 30m ./backend/etcd/
//
// against the embedded server, or LEASE_TEST_ETCD's. Each job holds its
// lease for LEASE_ETCD_SCALE_HOLD (default 20s) with a ttl of
// LEASE_ETCD_SCALE_TTL (default 6s). It fails only if a job ends with an
// error other than the lease being lost or the store refusing: the
// numbers are the result; say the load average next to them.
func TestScale(t *testing.T) {
	spec := os.Getenv("LEASE_ETCD_SCALE")
	if spec == "" {
		t.Skip("LEASE_ETCD_SCALE is not set (a list of job counts, such as 100,1000,10000)")
	}
	hold, ttl := 20*time.Second, 6*time.Second
	if d, err := time.ParseDuration(os.Getenv("LEASE_ETCD_SCALE_HOLD")); err == nil {
		hold = d
	}
	if d, err := time.ParseDuration(os.Getenv("LEASE_ETCD_SCALE_TTL")); err == nil {
		ttl = d
	}
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("LEASE_ETCD_SCALE: %q is not a positive count", f)
		}
		t.Run(strconv.Itoa(n), func(t *testing.T) { scale(t, n, ttl, hold) })
	}
}

func scale(t *testing.T, n int, ttl, hold time.Duration) {
	w := newWire()
	l := mustNew(t, newClient(t, testEndpoints, w), WithPrefix(randomPrefix()))
	var entered, lost, failed, kept atomic.Int64
	var mu sync.Mutex
	errorsSeen := map[string]int{}
	var lostWaits []time.Duration
	release := make(chan struct{})
	logs := &logCounter{seen: map[string]int{}}
	logger := slog.New(logs)
	var wg sync.WaitGroup
	start := time.Now()
	waited := make([]time.Duration, n) // from the start to fn, for the jobs that entered it
	for i := range n {
		wg.Go(func() {
			err := lease.Run(context.Background(), l, "job-"+strconv.Itoa(i), ttl, func(ctx context.Context) error {
				waited[i] = time.Since(start)
				entered.Add(1)
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}, lease.WithLogger(logger))
			switch {
			case err == nil:
				kept.Add(1)
			case errors.Is(err, lease.ErrLost):
				lost.Add(1)
				mu.Lock()
				lostWaits = append(lostWaits, waited[i])
				mu.Unlock()
			default:
				failed.Add(1)
				msg := err.Error()
				if i := strings.LastIndex(msg, ": "); i >= 0 && len(msg)-i < 120 {
					msg = msg[i+2:]
				}
				mu.Lock()
				errorsSeen[msg]++
				mu.Unlock()
			}
		})
	}
	// Wait until every job is in (or has failed), then measure the
	// renewals alone for the rest of the hold.
	for time.Since(start) < hold && entered.Load()+failed.Load()+lost.Load() < int64(n) {
		time.Sleep(10 * time.Millisecond)
	}
	acquired := time.Since(start)
	w.take()
	measured := time.Now()
	var peakGoroutines int
	var peakHeap uint64
	var ms runtime.MemStats
	for time.Since(start) < hold {
		peakGoroutines = max(peakGoroutines, runtime.NumGoroutine())
		runtime.ReadMemStats(&ms)
		peakHeap = max(peakHeap, ms.HeapInuse)
		time.Sleep(250 * time.Millisecond)
	}
	window := time.Since(measured)
	calls, total := w.take()
	close(release)
	wg.Wait()

	sweeps := window.Seconds() / (ttl / 3).Seconds()
	t.Logf("N=%d ttl=%s hold=%s: kept %d, lost %d, other errors %d; all acquired in %s",
		n, ttl, hold, kept.Load(), lost.Load(), failed.Load(), acquired.Round(time.Millisecond))
	t.Logf("renewals over %s (%.1f sweeps of ttl/3): %d requests (%s), %.0f per sweep, %.2f per renewal",
		window.Round(time.Millisecond), sweeps, total, calls, float64(total)/sweeps, float64(total)/sweeps/float64(n))
	t.Logf("peak goroutines %d, peak heap in use %.1f MiB (%.1f KiB per job, including the embedded server if any)",
		peakGoroutines, float64(peakHeap)/(1<<20), float64(peakHeap)/1024/float64(n))
	if len(lostWaits) > 0 {
		slices.Sort(lostWaits)
		t.Logf("the jobs that lost their lease had waited %s to %s (median %s) for it; ttl/3 is %s",
			lostWaits[0].Round(time.Millisecond), lostWaits[len(lostWaits)-1].Round(time.Millisecond), lostWaits[len(lostWaits)/2].Round(time.Millisecond), ttl/3)
	}
	if msgs := logs.summary(); msgs != "" {
		t.Logf("Run's warnings and errors: %s", msgs)
	}
	if len(errorsSeen) > 0 {
		var msgs []string
		for m, c := range errorsSeen {
			msgs = append(msgs, fmt.Sprintf("%d× %s", c, m))
		}
		sort.Strings(msgs)
		t.Logf("errors: %s", strings.Join(msgs, "; "))
	}
}

// logCounter is a slog.Handler that counts Run's warnings and errors by
// message and error text.
type logCounter struct {
	mu   sync.Mutex
	seen map[string]int
}

func (h *logCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *logCounter) Handle(_ context.Context, r slog.Record) error {
	key := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" {
			msg := a.Value.String()
			if i := strings.LastIndex(msg, ": "); i >= 0 {
				msg = msg[i+2:]
			}
			key += ": " + msg
		}
		return true
	})
	h.mu.Lock()
	h.seen[key]++
	h.mu.Unlock()
	return nil
}

func (h *logCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCounter) WithGroup(string) slog.Handler      { return h }

func (h *logCounter) summary() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var msgs []string
	for m, c := range h.seen {
		msgs = append(msgs, fmt.Sprintf("%d× %s", c, m))
	}
	sort.Strings(msgs)
	return strings.Join(msgs, "; ")
}
