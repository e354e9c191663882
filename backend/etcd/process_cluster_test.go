package etcdlease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/etcdtest"
	"github.com/leasekit/lease/internal/syncbuf"
	"github.com/leasekit/lease/internal/testenv"
	"github.com/leasekit/lease/internal/testserver"
)

// contenderEnv makes the test binary a contender process of
// TestClusterProcessContention: its value is the contender's
// contenderConfig, as JSON.
const contenderEnv = "LEASE_ETCD_TEST_CONTENDER"

// The contenders' timings: each tenure is on a ttl of contentionTTL
// (renewed every ttl/3 by lease.Run) and holds the name for shortHold, or
// for one in three (a "/long" owner) for longHold, unless it loses it
// first. A long holder cut off from the cluster less than
// longHold-contentionTTL after its grant must notice the loss before its
// work is done.
const (
	contentionTTL = 2 * time.Second
	shortHold     = 100 * time.Millisecond
	longHold      = 3 * time.Second
)

// contenderConfig tells a contender process what to do.
type contenderConfig struct {
	Endpoints []string // the members its client may use
	Prefix    string   // the Locker's key prefix
	Owner     string   // its owner names are Owner#n
	Limit     time.Time
}

// tenure is one tenure a contender held, as the holder saw it.
type tenure struct {
	Owner string
	Token uint64
	// Start is when fn was entered; End when fn saw its work done or its
	// context end; Deadline the lease's last Deadline (wall clock).
	Start, End, Deadline time.Time
	// Lost: fn's context was cancelled with ErrLost (a renewal found the
	// tenure lost, or the Deadline passed without one); Cause says which.
	Lost  bool
	Cause string
}

// stopped is when the holder stopped acting as one: at End, or at its
// Deadline if fn saw the end of its context only after it.
func (tn tenure) stopped() time.Time {
	if !tn.Deadline.IsZero() && tn.Deadline.Before(tn.End) {
		return tn.Deadline
	}
	return tn.End
}

// TestClusterProcessContention: four processes (this test binary, run as
// TestClusterContender) contend for one name on a 3-member etcd cluster
// (Debian's etcd, on its own ports). Three reach one member each, as a
// process cut off with its member would; the fourth reaches all three.
// Each holds the name on a 2s ttl (lease.Run renews it) for 100ms, or
// one time in six for 3s, or until it loses it. While they contend:
//
//   - the leader is killed just after a process that reaches only the
//     leader was granted a long hold (leadership is moved to that
//     process's member first), then restarted;
//   - the member of the next such holder is stopped (SIGSTOP: it neither
//     answers nor fails, as a partition would cut it off), then resumed.
//
// Checked: no two holders overlap (a holder stops at its Deadline, which
// Run guarantees), tokens grow strictly in the order the name was held,
// tenures are granted after each event, and a holder cut off early in
// its tenure stopped, with ErrLost, before its work was done. Logged:
// how long each such holder took to notice, and when the next holder was
// granted the name.
//
// Its failover windows are timed: it runs alone (not parallel).
func TestClusterProcessContention(t *testing.T) {
	testenv.Slow(t)
	if os.Getenv(contenderEnv) != "" {
		t.Skip("running as a contender process")
	}
	e := testserver.StartEtcd(t, &testserver.EtcdOptions{Members: 3})
	eps := e.Endpoints()
	prefix := randomPrefix()
	test := time.Now()

	var procs []*contender
	for i := range 4 {
		cfg := contenderConfig{Prefix: prefix, Limit: time.Now().Add(45 * time.Second)}
		if i < 3 {
			cfg.Endpoints, cfg.Owner = eps[i:i+1], "p"+strconv.Itoa(i)+"@m"+strconv.Itoa(i)
		} else {
			cfg.Endpoints, cfg.Owner = eps, "p3@all"
		}
		procs = append(procs, startContender(t, cfg))
	}
	stopAll := sync.OnceFunc(func() {
		for _, p := range procs {
			p.stop()
		}
	})
	t.Cleanup(stopAll)

	obs := mustNew(t, newClient(t, eps, nil), WithPrefix(prefix))
	type event struct {
		what   string
		at     time.Time
		member int    // the member it cut off, or -1
		holder string // the owner then holding the name, from Inspect
	}
	var events []event

	// The leader, with a holder that reaches only it, is killed.
	owner, m := freshPinnedHolder(t, obs)
	if leader := e.Leader(); leader != m {
		moveLeader(t, e, m)
	}
	killed := time.Now()
	e.Member(m).Kill()
	events = append(events, event{"the leader killed", killed, m, owner})
	time.Sleep(contentionTTL + 1500*time.Millisecond)
	e.Member(m).Start()
	events = append(events, event{"the killed member restarted", time.Now(), -1, ""})
	awaitGrant(t, obs, "the restart")

	// A follower, with a holder that reaches only it, is stopped.
	owner, m = freshPinnedHolder(t, obs)
	if leader := e.Leader(); leader == m {
		moveLeader(t, e, (m+1)%3)
	}
	paused := time.Now()
	e.Member(m).Pause()
	events = append(events, event{"a follower stopped", paused, m, owner})
	time.Sleep(contentionTTL + 1500*time.Millisecond)
	e.Member(m).Resume()
	events = append(events, event{"the follower resumed", time.Now(), -1, ""})
	awaitGrant(t, obs, "the follower's resumption")
	time.Sleep(500 * time.Millisecond)

	stopAll()
	var all []tenure
	storeErrs := 0
	for _, p := range procs {
		tenures, errs := p.wait(t)
		all = append(all, tenures...)
		storeErrs += errs
	}
	if t.Failed() {
		return
	}
	slices.SortFunc(all, func(a, b tenure) int { return a.Start.Compare(b.Start) })

	// No overlap, and tokens grow in the order the name was held.
	var last tenure // the tenure that stopped last so far
	for i, tn := range all {
		if i > 0 {
			if tn.Start.Before(last.stopped()) {
				t.Errorf("%s held token %d from %s while %s held token %d until %s", tn.Owner, tn.Token, clock(tn.Start), last.Owner, last.Token, clock(last.stopped()))
			}
			if prev := all[i-1]; tn.Token <= prev.Token {
				t.Errorf("token %d (%s) came after token %d (%s): tokens went back", tn.Token, tn.Owner, prev.Token, prev.Owner)
			}
		}
		if i == 0 || tn.stopped().After(last.stopped()) {
			last = tn
		}
	}

	for _, ev := range events {
		var held, next *tenure
		for i := range all {
			tn := &all[i]
			if !tn.Start.After(ev.at) && tn.End.After(ev.at) {
				held = tn
			}
			if tn.Start.After(ev.at) && next == nil {
				next = tn
			}
		}
		if next == nil {
			t.Errorf("no tenure was granted after %s", ev.what)
			continue
		}
		if ev.member < 0 {
			t.Logf("%-28s: next grant %s after it", ev.what, next.Start.Sub(ev.at).Round(time.Millisecond))
			continue
		}
		if held == nil || held.Owner != ev.holder {
			t.Logf("%-28s (member %d): its holder %s had already stopped; next grant %s after it", ev.what, ev.member, ev.holder, next.Start.Sub(ev.at).Round(time.Millisecond))
			continue
		}
		into := ev.at.Sub(held.Start)
		if !held.Lost {
			msg := fmt.Sprintf("%-28s (member %d), %s into %s's tenure: it did its %s of work and did not notice", ev.what, ev.member, into.Round(time.Millisecond), held.Owner, longHold)
			if into < longHold-contentionTTL {
				t.Errorf("%s, though its Deadline was due before", msg)
			} else {
				t.Log(msg)
			}
			continue
		}
		t.Logf("%-28s (member %d), %s into %s's tenure: it noticed after %s (%s); the next holder was granted it %s after the event, %s after the old holder stopped",
			ev.what, ev.member, into.Round(time.Millisecond), held.Owner, held.End.Sub(ev.at).Round(time.Millisecond), held.Cause,
			next.Start.Sub(ev.at).Round(time.Millisecond), next.Start.Sub(held.stopped()).Round(time.Millisecond))
	}
	t.Logf("%d tenures by 4 processes in %s, %d store errors (calls to a dead or stopped member)", len(all), time.Since(test).Round(100*time.Millisecond), storeErrs)
}

// clock formats a time of day for messages.
func clock(t time.Time) string { return t.Format("15:04:05.000") }

// freshPinnedHolder waits (up to 15s) until the name "contended" has a new
// tenure, a long hold by a contender that reaches only one member, and
// returns its owner and that member's index.
func freshPinnedHolder(t *testing.T, obs *Locker) (string, int) {
	t.Helper()
	seen := inspectToken(t, obs)
	for limit := time.Now().Add(15 * time.Second); time.Now().Before(limit); time.Sleep(10 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		held, err := obs.Inspect(ctx, "contended")
		cancel()
		if err != nil || held.Token == seen {
			continue
		}
		seen = held.Token
		_, member, pinned := strings.Cut(held.Owner, "@m")
		if !pinned || !strings.HasSuffix(held.Owner, "/long") {
			continue
		}
		if m, err := strconv.Atoi(member[:strings.IndexByte(member, '#')]); err == nil {
			return held.Owner, m
		}
	}
	t.Fatal("no contender that reaches one member was granted a long hold within 15s")
	return "", 0
}

// awaitGrant waits (up to 10s) until the name "contended" has a tenure
// newer than the one it had, or until it is held if it was free.
func awaitGrant(t *testing.T, obs *Locker, after string) {
	t.Helper()
	seen := inspectToken(t, obs)
	for limit := time.Now().Add(10 * time.Second); time.Now().Before(limit); time.Sleep(10 * time.Millisecond) {
		if tok := inspectToken(t, obs); tok != 0 && tok != seen {
			return
		}
	}
	t.Fatalf("no tenure was granted within 10s after %s", after)
}

// inspectToken returns the token of the tenure of "contended", or 0 if
// it is free or the call fails.
func inspectToken(t *testing.T, obs *Locker) uint64 {
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	held, err := obs.Inspect(ctx, "contended")
	if err != nil {
		return 0
	}
	return held.Token
}

// moveLeader makes member to the leader of e (MoveLeader, sent to the
// leader) and waits until the members agree.
func moveLeader(t *testing.T, e *testserver.Etcd, to int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoints()[e.Leader()]}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	members, err := c.MemberList(ctx)
	if err != nil {
		t.Fatalf("member list: %v", err)
	}
	var id uint64
	for _, m := range members.Members {
		for _, u := range m.ClientURLs {
			if strings.HasSuffix(u, "//"+e.Endpoints()[to]) {
				id = m.ID
			}
		}
	}
	if id == 0 {
		t.Fatalf("no member serves %s", e.Endpoints()[to])
	}
	if _, err := c.MoveLeader(ctx, id); err != nil {
		t.Fatalf("moving the leadership to member %d: %v", to, err)
	}
	for i := 0; e.Leader() != to; i++ {
		if i == 100 {
			t.Fatalf("member %d is not the leader 100 checks after MoveLeader", to)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// contender is a contender process.
type contender struct {
	cfg   contenderConfig
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *syncbuf.Buffer
	once  sync.Once
}

// startContender starts a contender process.
func startContender(t *testing.T, cfg contenderConfig) *contender {
	t.Helper()
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &contender{cfg: cfg, out: &syncbuf.Buffer{}}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestClusterContender$", "-test.count=1", "-test.v")
	// The contender's TestMain is pointed at the cluster, so that it does
	// not start an embedded etcd when LEASE_TEST_ETCD is unset.
	p.cmd.Env = append(os.Environ(), contenderEnv+"="+string(js), etcdtest.Env+"="+strings.Join(cfg.Endpoints, ","))
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.stop()
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return p
}

// stop tells the process to end its last tenure and exit (its stdin
// closes).
func (p *contender) stop() { p.once.Do(func() { _ = p.stdin.Close() }) }

// wait waits (up to 15s) for the process to exit, and returns the tenures
// it reported and how many store errors it saw. It fails t if the process
// failed or did not exit.
func (p *contender) wait(t *testing.T) ([]tenure, int) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("contender %s: %v\n%s", p.cfg.Owner, err, p.out.String())
			return nil, 0
		}
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
		t.Errorf("contender %s did not exit within 15s of being told to\n%s", p.cfg.Owner, p.out.String())
		return nil, 0
	}
	var (
		tenures []tenure
		errs    int
	)
	for _, line := range strings.Split(p.out.String(), "\n") {
		if js, ok := strings.CutPrefix(line, "TENURE "); ok {
			var tn tenure
			if err := json.Unmarshal([]byte(js), &tn); err != nil {
				t.Fatalf("contender %s: %q: %v", p.cfg.Owner, line, err)
			}
			tenures = append(tenures, tn)
		}
		if n, ok := strings.CutPrefix(line, "STORE-ERRORS "); ok {
			errs, _ = strconv.Atoi(strings.TrimSpace(n))
		}
	}
	return tenures, errs
}

// TestClusterContender is a contender process of
// TestClusterProcessContention: it runs lease.Run on "contended" over and
// over (waiting up to 1s for it when it is held), holding it for
// shortHold or longHold, until its stdin closes
// or its time limit passes, and prints each tenure it held.
func TestClusterContender(t *testing.T) {
	raw := os.Getenv(contenderEnv)
	if raw == "" {
		t.Skip("only run as a contender process of TestClusterProcessContention")
	}
	var cfg contenderConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), cfg.Limit)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	c, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := New(c, WithPrefix(cfg.Prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	storeErrs := 0
	for n := 0; ctx.Err() == nil && n < 1000; n++ {
		owner, hold := cfg.Owner+"#"+strconv.Itoa(n), shortHold
		if rand.IntN(6) == 0 {
			owner, hold = owner+"/long", longHold
		}
		var tn tenure
		err := lease.Run(ctx, l, "contended", contentionTTL, func(ctx context.Context) error {
			held, _ := lease.FromContext(ctx)
			tn = tenure{Owner: owner, Token: held.Token, Start: time.Now()}
			work := time.NewTimer(hold)
			defer work.Stop()
			select {
			case <-work.C:
			case <-ctx.Done():
			}
			tn.End = time.Now()
			held, _ = lease.FromContext(ctx)
			tn.Deadline = held.Deadline
			if cause := context.Cause(ctx); cause != nil && errors.Is(cause, lease.ErrLost) {
				tn.Lost, tn.Cause = true, "a renewal found it lost"
				if strings.Contains(cause.Error(), "deadline passed") {
					tn.Cause = "its Deadline passed without a renewal"
				}
			}
			return nil
		}, lease.WithOwner(owner), lease.WithWait(time.Second))
		if tn.Token != 0 {
			js, _ := json.Marshal(tn)
			fmt.Printf("TENURE %s\n", js)
		}
		if err != nil && !errors.Is(err, lease.ErrHeld) && !errors.Is(err, lease.ErrLost) && ctx.Err() == nil {
			storeErrs++
			time.Sleep(50 * time.Millisecond)
		}
	}
	fmt.Printf("STORE-ERRORS %d\n", storeErrs)
}
