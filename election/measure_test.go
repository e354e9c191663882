package election_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/election"
	"github.com/leasekit/lease/election/electiontest"
)

// measureEnv turns on TestMeasureHandoff.
const measureEnv = "LEASE_ELECTION_MEASURE"

// TestMeasureHandoff measures how long the office stays without a working
// leader when the leader hands off, per store, and prints a table. It is
// a measurement, not a test: it asserts nothing about time, and runs only
// when LEASE_ELECTION_MEASURE=1:
//
//	source /work/notes/ci-env.sh   # or set LEASE_TEST_* yourself
//	LEASE_ELECTION_MEASURE=1 go test -run TestMeasureHandoff -v -timeout 30m ./election/
//
// Each round: node-a leads (ttl 2s), node-b has stood by for 2s (long
// enough for a polling waiter's backoff to reach its steady state), then
// node-a ends its term:
//
//   - voluntary: node-a resigns. "gap" is from the end of node-a's work
//     to the start of node-b's (release round trip plus node-b's
//     wake-up); "resign" from the Resign call to node-b's start.
//   - crash: node-a's Locker is closed without releasing. "close" is from
//     the close to the start of node-b's work (the rest of the ttl plus
//     the expiry lag plus node-b's wake-up); "Deadline" from node-a's
//     Deadline, when its work stopped, to the start of node-b's work (the
//     drift margin, the expiry lag and the wake-up).
func TestMeasureHandoff(t *testing.T) {
	if os.Getenv(measureEnv) != "1" {
		t.Skipf("a measurement: set %s=1 to run it", measureEnv)
	}
	const (
		rounds  = 10
		crashes = 5
		ttl     = 2 * time.Second
		settle  = 2 * time.Second
	)
	stores := []struct {
		name string
		h    func(testing.TB) electiontest.Harness
	}{
		{"memory", memoryHarness},
		{"sqlite", sqliteHarness},
		{"postgres", postgresHarness},
		{"mariadb", mysqlHarness},
		{"redis", func(t testing.TB) electiontest.Harness {
			if os.Getenv("LEASE_TEST_REDIS") == "" {
				return miniredisHarness(t)
			}
			return redisHarness(t)
		}},
		{"etcd", etcdHarness},
	}
	load := func() string {
		b, _ := os.ReadFile("/proc/loadavg")
		return strings.Join(strings.Fields(string(b))[:min(3, len(strings.Fields(string(b))))], " ")
	}
	var table []string
	table = append(table, fmt.Sprintf("load average at the start: %s", load()))
	table = append(table, "p50 / max of: voluntary: the old work's end, and Resign, to the new work's start; crash: the close, and the dead leader's Deadline, to the new work's start")
	table = append(table, fmt.Sprintf("%-9s %-22s %-22s %-22s %-22s", "store", "voluntary: gap", "from Resign", "crash: from close", "from Deadline"))
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			h := st.h(t)
			var gaps, resigns, crashGaps, pastDeadline []time.Duration
			for i := range rounds + crashes {
				crash := i >= rounds
				g, r := handoffRound(t, h, fmt.Sprintf("measure/%s/%d", st.name, i), ttl, settle, crash)
				if crash {
					crashGaps, pastDeadline = append(crashGaps, g), append(pastDeadline, r)
				} else {
					gaps, resigns = append(gaps, g), append(resigns, r)
				}
			}
			row := fmt.Sprintf("%-9s %-22s %-22s %-22s %-22s", st.name, stats(gaps), stats(resigns), stats(crashGaps), stats(pastDeadline))
			t.Log(row)
			table = append(table, row)
		})
	}
	table = append(table, fmt.Sprintf("load average at the end: %s; ttl %s, %d voluntary rounds and %d crashes per store", load(), ttl, rounds, crashes))
	fmt.Println(strings.Join(table, "\n"))
}

// handoffRound runs one handoff and returns, for a voluntary one, the gap
// and the time from Resign to the next leader's start, for a crash the
// time from the close and from the dead leader's Deadline.
func handoffRound(t *testing.T, h electiontest.Harness, office string, ttl, settle time.Duration, crash bool) (gap, resign time.Duration) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	la, lb := h.New(t), h.New(t)
	defer la.Close()
	defer lb.Close()
	a, err := election.NewCandidate(la, office, election.WithTTL(ttl), election.WithID("node-a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := election.NewCandidate(lb, office, election.WithTTL(ttl), election.WithID("node-b"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var aEnd, aDeadline, bStart time.Time
	aLeads, bLeads := make(chan struct{}), make(chan struct{})
	aDone, bDone := make(chan error, 1), make(chan error, 1)
	go func() {
		aDone <- a.Run(ctx, func(ctx context.Context, _ election.Term) error {
			close(aLeads)
			<-ctx.Done()
			held, _ := lease.FromContext(ctx)
			mu.Lock()
			aEnd, aDeadline = time.Now(), held.Deadline
			mu.Unlock()
			return nil
		})
	}()
	select {
	case <-aLeads:
	case <-ctx.Done():
		t.Fatal("node-a was not elected")
	}
	go func() {
		bDone <- b.Run(ctx, func(ctx context.Context, _ election.Term) error {
			mu.Lock()
			bStart = time.Now()
			mu.Unlock()
			close(bLeads)
			<-ctx.Done()
			return nil
		})
	}()
	time.Sleep(settle)
	var from time.Time
	if crash {
		from = time.Now()
		_ = la.Close()
	} else {
		from = time.Now()
		if err := a.Resign(ctx); err != nil {
			t.Fatalf("Resign: %v", err)
		}
	}
	select {
	case <-bLeads:
	case <-ctx.Done():
		t.Fatal("node-b was not elected")
	}
	cancel()
	<-aDone
	<-bDone
	mu.Lock()
	defer mu.Unlock()
	if crash {
		return bStart.Sub(from), bStart.Sub(aDeadline)
	}
	return bStart.Sub(aEnd), bStart.Sub(from)
}

// stats formats the median and maximum of ds.
func stats(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("%s / %s", round(s[len(s)/2]), round(s[len(s)-1]))
}

func round(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(100 * time.Microsecond)
}
