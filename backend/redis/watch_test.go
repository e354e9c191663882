package redislease_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
	"github.com/leasekit/lease/internal/faultproxy"
	"github.com/leasekit/lease/internal/line"
	"github.com/leasekit/lease/internal/testenv"
)

// watchServer is a server the Watch tests run on.
type watchServer struct {
	name string
	addr func(t *testing.T) string // host:port, set up for t
}

// watchServers are miniredis (which runs PUBLISH from Lua scripts) and
// the real server in LEASE_TEST_REDIS (skipped when it is unset).
var watchServers = []watchServer{
	{"miniredis", func(t *testing.T) string { return miniredis.RunT(t).Addr() }},
	{"redis", func(t *testing.T) string {
		c, _ := realRedis(t, -1)
		return c.Options().Addr
	}},
}

// eachWatchServer runs f on every watch server with a Locker under a
// fresh prefix (closed when the subtest ends) and the server's address,
// the servers' subtests in parallel.
func eachWatchServer(t *testing.T, f func(t *testing.T, addr, prefix string, newLocker func(addr string) *redislease.Locker)) {
	watchServersRun(t, true, f)
}

// watchServersRun is eachWatchServer, with the servers' subtests in
// parallel or one after the other.
func watchServersRun(t *testing.T, parallel bool, f func(t *testing.T, addr, prefix string, newLocker func(addr string) *redislease.Locker)) {
	for _, s := range watchServers {
		t.Run(s.name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			addr := s.addr(t)
			prefix := randomPrefix("watch")
			deleteKeys(t, newClient(t, addr), prefix)
			newLocker := func(addr string) *redislease.Locker {
				c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
				l := mustNew(t, c, redislease.WithPrefix(prefix))
				t.Cleanup(func() { _ = l.Close(); _ = c.Close() })
				return l
			}
			f(t, addr, prefix, newLocker)
		})
	}
}

func wakeWithin(t *testing.T, c <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(d):
		t.Fatalf("the watch did not wake within %s of %s", d, what)
	}
}

func drain(c <-chan struct{}) {
	select {
	case <-c:
	default:
	}
}

// channelOf is the pub/sub channel of name under prefix.
func channelOf(prefix, name string) string {
	sum := sha256.Sum256([]byte(name))
	return prefix + "{" + base64.RawURLEncoding.EncodeToString(sum[:]) + "}:free"
}

// numsub is how many subscribers the server counts on channel.
func numsub(t *testing.T, c *redis.Client, channel string) int64 {
	t.Helper()
	n, err := c.PubSubNumSub(t.Context(), channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n[channel]
}

// waitNumsub waits, up to 5s, until channel has want subscribers.
func waitNumsub(t *testing.T, c *redis.Client, channel string, want int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got := numsub(t, c, channel)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d subscribers, want %d", channel, got, want)
		}
	}
}

// TestWatchWakesOnRelease: Release and ForceRelease publish on the name's
// channel, and a Watch hears it; a Renew does not wake it.
func TestWatchWakesOnRelease(t *testing.T) {
	t.Parallel()
	eachWatchServer(t, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		l := newLocker(addr)
		ctx := t.Context()
		w, err := l.Watch(ctx, "jobs/w")
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		defer w.Stop()
		held, err := l.Acquire(ctx, "jobs/w", "owner-a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if held, err = l.Renew(ctx, held, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx, held); err != nil {
			t.Fatal(err)
		}
		wakeWithin(t, w.Changed(), 5*time.Second, "a Release")
		if _, err := l.Acquire(ctx, "jobs/w", "owner-b", time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := l.ForceRelease(ctx, "jobs/w"); err != nil {
			t.Fatal(err)
		}
		wakeWithin(t, w.Changed(), 5*time.Second, "a ForceRelease")
		// A lost Release publishes nothing.
		if err := l.Release(ctx, held); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("second Release: %v, want ErrLost", err)
		}
		select {
		case <-w.Changed():
			t.Fatal("a Release that found the lease lost woke the watch")
		case <-time.After(50 * time.Millisecond):
		}
	})
}

// TestWatchSubscriptionsAreCounted: Watches of one Locker share one
// subscription per name, which stays (idle) after the last Watch on it
// stopped, for the next Watch of the name; Stop, the end of a Watch's
// context and Close leave no goroutine. Not parallel, nor its subtests:
// goleak.Find sees every goroutine of the process, other tests' too.
func TestWatchSubscriptionsAreCounted(t *testing.T) {
	watchServersRun(t, false, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		before := goleak.IgnoreCurrent()
		c := newClient(t, addr)
		l := newLocker(addr)
		ctx := t.Context()
		ch := channelOf(prefix, "jobs/c")
		w1, err := l.Watch(ctx, "jobs/c")
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		w2, err := l.Watch(wctx, "jobs/c")
		if err != nil {
			t.Fatal(err)
		}
		other, err := l.Watch(ctx, "jobs/other")
		if err != nil {
			t.Fatal(err)
		}
		if n := numsub(t, c, ch); n != 1 {
			t.Fatalf("two Watches on a name: %d subscribers, want 1", n)
		}
		w1.Stop()
		w1.Stop()
		if n := numsub(t, c, ch); n != 1 {
			t.Fatalf("one Watch left on the name: %d subscribers, want 1", n)
		}
		cancel()
		time.Sleep(20 * time.Millisecond)
		if n := numsub(t, c, ch); n != 1 {
			t.Fatalf("the last Watch on the name stopped: %d subscribers, want 1 (idle)", n)
		}
		_ = w2
		// A name watched again after its last Watch stopped uses the idle
		// subscription, and hears releases.
		w3, err := l.Watch(ctx, "jobs/c")
		if err != nil {
			t.Fatal(err)
		}
		held, err := l.Acquire(ctx, "jobs/c", "owner-a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx, held); err != nil {
			t.Fatal(err)
		}
		wakeWithin(t, w3.Changed(), 5*time.Second, "a Release")
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		other.Stop()
		w3.Stop()
		if _, err := l.Watch(ctx, "jobs/c"); !errors.Is(err, lease.ErrClosed) {
			t.Fatalf("Watch after Close: %v, want ErrClosed", err)
		}
		_ = c.Close()
		// The server's side of the client's pooled connections (miniredis
		// runs in this process) lives until the client closes at cleanup.
		if err := goleak.Find(before, goleak.IgnoreAnyFunction("github.com/alicebob/miniredis/v2/server.(*Server).servePeer"), goleak.IgnoreAnyFunction("github.com/alicebob/miniredis/v2/server.(*Server).servePeer.func2")); err != nil {
			t.Fatalf("after Close: %v", err)
		}
	})
}

// TestWatchSurvivesADroppedConnection: when the pub/sub connection is
// reset, the Watch wakes; a release while it cannot reconnect is not
// heard, so the Watch wakes again once it has subscribed on a new
// connection.
func TestWatchSurvivesADroppedConnection(t *testing.T) {
	t.Parallel()
	eachWatchServer(t, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		ctx := t.Context()
		p := faultproxy.StartT(t, addr)
		direct := newLocker(addr)
		l := newLocker(p.Addr())
		held, err := direct.Acquire(ctx, "jobs/d", "owner-a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		w, err := l.Watch(ctx, "jobs/d")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		p.Refuse()
		p.Reset()
		wakeWithin(t, w.Changed(), 5*time.Second, "the connection's reset")
		if err := direct.Release(ctx, held); err != nil {
			t.Fatal(err)
		}
		drain(w.Changed())
		if err := p.Clear(); err != nil {
			t.Fatal(err)
		}
		wakeWithin(t, w.Changed(), 10*time.Second, "the proxy letting connections through again")
		// And the new subscription hears releases.
		held, err = direct.Acquire(ctx, "jobs/d", "owner-a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		drain(w.Changed())
		if err := direct.Release(ctx, held); err != nil {
			t.Fatal(err)
		}
		wakeWithin(t, w.Changed(), 5*time.Second, "a Release after the reconnection")
	})
}

// TestWatchWakesWhenThePubSubGoesSilent: a pub/sub connection that stops
// answering (a blackhole: no reset, no FIN) is found out by its pings and
// wakes the Watch, so a waiter polls rather than waits for a message that
// cannot come.
func TestWatchWakesWhenThePubSubGoesSilent(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	eachWatchServer(t, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		ctx := t.Context()
		p := faultproxy.StartT(t, addr)
		l := newLocker(p.Addr())
		w, err := l.Watch(ctx, "jobs/s")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		p.Stall(faultproxy.Both)
		// Two ping intervals (2s each) find it out.
		wakeWithin(t, w.Changed(), 10*time.Second, "the pub/sub connection going silent")
		p.Stall(0)
	})
}

// handoff records, in order, what a waiter's Run does and sees: its
// attempts, and the Release of the holder, which it makes right after the
// first busy answer, before Run sees that answer.
type handoff struct {
	*redislease.Locker
	release    func(context.Context) error
	releaseErr error
	mu         sync.Mutex
	events     []string
	at         []time.Time
	taken      bool          // every waiting attempt's place was in the Locker's line
	retry      time.Duration // the waiter's retry interval
	busy       chan struct{}
	once       sync.Once
}

func (h *handoff) add(e string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
	h.at = append(h.at, time.Now())
}

// Acquire records an attempt, and releases the holder's lease after the
// first busy answer.
func (h *handoff) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	h.add("acquire")
	ls, err := h.Locker.Acquire(ctx, name, owner, ttl)
	w := line.FromContext(ctx)
	h.mu.Lock()
	h.taken = h.taken && w != nil && w.Taken()
	if w != nil {
		h.retry = w.Retry
	}
	h.mu.Unlock()
	if errors.Is(err, lease.ErrHeld) {
		h.once.Do(func() {
			h.releaseErr = h.release(ctx)
			h.add("released")
			close(h.busy)
		})
	}
	return ls, err
}

// TestRunWaitingHandsOverOnRelease: lease.Run with WithWait on Redis gets
// a busy name after its holder releases it because the release woke it:
// the Release comes right after a busy answer, while the waiter is in its
// Locker's line, so that its fallback poll is a whole retry interval (2s)
// away and the holder's expiry a minute; the waiter's next Acquire (the
// one that wins) comes before either, which only a wake-up explains.
func TestRunWaitingHandsOverOnRelease(t *testing.T) {
	t.Parallel()
	eachWatchServer(t, func(t *testing.T, addr, prefix string, newLocker func(string) *redislease.Locker) {
		l := newLocker(addr)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		held, err := l.Acquire(ctx, "jobs/h", "holder", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		h := &handoff{Locker: l, taken: true, busy: make(chan struct{}), release: func(ctx context.Context) error {
			return l.Release(context.WithoutCancel(ctx), held)
		}}
		err = lease.Run(ctx, h, "jobs/h", time.Minute, func(context.Context) error {
			h.add("entered")
			return nil
		}, lease.WithWait(time.Minute), lease.WithOwner("waiter"))
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		select {
		case <-h.busy:
		default:
			t.Fatal("the waiter never found the name busy")
		}
		if h.releaseErr != nil {
			t.Fatalf("Release: %v", h.releaseErr)
		}
		h.mu.Lock()
		events, at, taken, retry := slices.Clone(h.events), slices.Clone(h.at), h.taken, h.retry
		h.mu.Unlock()
		if !taken || retry <= 0 {
			t.Fatalf("the waiter's attempts were not all in the Locker's line (retry %s)", retry)
		}
		r := slices.Index(events, "released")
		after := events[r+1:]
		want := []string{"acquire", "entered"}
		if !slices.Equal(after, want) {
			t.Fatalf("after the Release the waiter did %v, want %v (all: %v)", after, want, events)
		}
		if d := at[r+1].Sub(at[r]); d >= retry {
			t.Fatalf("the waiter tried again %s after the Release, not before its retry (%s): it was not woken", d, retry)
		}
	})
}
