package etcdlease

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/testenv"
	"github.com/leasekit/lease/internal/testserver"
)

// TestClusterFailuresDuringContention: four Lockers, each on a client of
// its own (as four processes would be), contend for one name on a
// 3-member etcd cluster (Debian's etcd, on its own ports) while its leader
// is killed, restarted, and another member is stopped (SIGSTOP, as a
// partition would cut it off) and resumed. No two holders ever hold the
// name at once (a holder holds from its Acquire's answer to its Release
// or its Deadline, whichever is first), the tokens grow in the order the
// name was held, and the Lockers go on acquiring after each event; the
// test logs how long each event stopped the grants.
//
// Its failover windows are timed: it runs alone (not parallel).
func TestClusterFailuresDuringContention(t *testing.T) {
	testenv.Slow(t)
	e := testserver.StartEtcd(t, &testserver.EtcdOptions{Members: 3})
	type hold struct {
		token      uint64
		owner      string
		from, till time.Time
	}
	var (
		mu     sync.Mutex
		holds  []hold
		errs   int
		events []struct {
			what string
			at   time.Time
		}
	)
	event := func(what string) {
		mu.Lock()
		events = append(events, struct {
			what string
			at   time.Time
		}{what, time.Now()})
		mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Second)
	defer cancel()
	prefix := randomPrefix()
	var wg sync.WaitGroup
	for w := range 4 {
		l := mustNew(t, newClient(t, e.Endpoints(), nil), WithPrefix(prefix))
		owner := "worker-" + string(rune('a'+w))
		wg.Go(func() {
			for i := 0; ctx.Err() == nil && i < 100000; i++ {
				actx, acancel := context.WithTimeout(ctx, time.Second)
				held, err := l.Acquire(actx, "contended", owner, 2*time.Second)
				acancel()
				if err != nil {
					if !errors.Is(err, lease.ErrHeld) {
						mu.Lock()
						errs++
						mu.Unlock()
					}
					time.Sleep(20 * time.Millisecond)
					continue
				}
				from := time.Now()
				time.Sleep(50 * time.Millisecond)
				till := time.Now()
				if held.Deadline.Before(till) {
					till = held.Deadline
				}
				mu.Lock()
				holds = append(holds, hold{held.Token, owner, from, till})
				mu.Unlock()
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
				_ = l.Release(rctx, held)
				rcancel()
			}
		})
	}
	time.Sleep(2 * time.Second)
	killed := e.KillLeader()
	event("leader killed")
	time.Sleep(1500 * time.Millisecond)
	e.Member(killed).Start()
	event("killed member restarted")
	time.Sleep(1500 * time.Millisecond)
	paused := (e.Leader() + 1) % 3
	e.Member(paused).Pause()
	event("a follower stopped")
	time.Sleep(2 * time.Second)
	e.Member(paused).Resume()
	event("the follower resumed")
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(holds, func(a, b hold) int { return a.from.Compare(b.from) })
	for i := 1; i < len(holds); i++ {
		a, b := holds[i-1], holds[i]
		if b.from.Before(a.till) {
			t.Errorf("%s held token %d from %s while %s held token %d until %s", b.owner, b.token, b.from.Format("15:04:05.000"), a.owner, a.token, a.till.Format("15:04:05.000"))
		}
		// A Release that failed in the outage leaves its tenure in doubt:
		// the owner's next Acquire ends it and starts a new one with a
		// larger token (driver/doubts.go), never re-enters it.
		if b.token <= a.token {
			t.Errorf("token %d (%s) came after token %d (%s): tokens went back", b.token, b.owner, a.token, a.owner)
		}
	}
	for _, ev := range events {
		var last, next time.Time
		n := 0
		for _, h := range holds {
			switch {
			case h.from.Before(ev.at):
				last = h.from
			case next.IsZero():
				next = h.from
				fallthrough
			default:
				n++
			}
		}
		if n == 0 {
			t.Errorf("no tenure was granted after %q", ev.what)
			continue
		}
		t.Logf("%-24s: grants stopped for %s (last before %s before it, first after %s after it)", ev.what, next.Sub(last).Round(time.Millisecond), ev.at.Sub(last).Round(time.Millisecond), next.Sub(ev.at).Round(time.Millisecond))
	}
	t.Logf("%d tenures, %d store errors (calls to a dead or stopped member)", len(holds), errs)
}
