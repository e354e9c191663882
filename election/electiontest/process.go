package electiontest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/election"
	"github.com/leasekit/lease/internal/syncbuf"
)

// childEnv carries a child process's instructions (a JSON childSpec).
const childEnv = "LEASE_ELECTIONTEST_CHILD"

// reportPrefix starts every line a child reports on its standard output.
const reportPrefix = "ELECTIONTEST "

// childSpec tells a child process what to do.
type childSpec struct {
	URL    string
	Office string
	ID     string
	TTL    time.Duration
	// Mode is "contend" (lead Terms terms, each for Hold, standing aside
	// for Pause after each) or "lead" (run a candidate until killed).
	Mode        string
	Terms       int
	Hold, Pause time.Duration
	// Timeout bounds the child's life, in case its parent is gone.
	Timeout time.Duration
}

// childReport is one line of a child's report.
type childReport struct {
	// Event is "term" (a term's work ended: Term, Start, End), "leading"
	// (elected: Term) or "error" (Err).
	Event      string
	Term       uint64
	Start, End int64 // wall clock, Unix nanoseconds
	Err        string
}

// Child runs this process as one of the suite's candidate processes when
// the suite started it so, and then exits; otherwise it returns at once.
// Call it first in the TestMain of a package that runs the suite with
// Harness.URL set:
//
//	func TestMain(m *testing.M) {
//		electiontest.Child()
//		goleak.VerifyTestMain(m)
//	}
//
// The test binary must import the backend that registers Harness.URL's
// scheme (or backend/all).
func Child() {
	raw := os.Getenv(childEnv)
	if raw == "" {
		return
	}
	os.Exit(child(raw))
}

func child(raw string) int {
	report := func(r childReport) {
		b, _ := json.Marshal(r)
		fmt.Println(reportPrefix + string(b))
	}
	fail := func(format string, args ...any) int {
		report(childReport{Event: "error", Err: fmt.Sprintf(format, args...)})
		return 1
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return fail("%s: %v", childEnv, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), spec.Timeout)
	defer cancel()
	l, err := lease.Open(ctx, spec.URL)
	if err != nil {
		return fail("open the store: %v", err)
	}
	defer l.Close()
	c, err := election.NewCandidate(l, spec.Office, election.WithTTL(spec.TTL), election.WithID(spec.ID))
	if err != nil {
		return fail("%v", err)
	}
	switch spec.Mode {
	case "contend":
		for range spec.Terms {
			err := c.Lead(ctx, func(ctx context.Context, t election.Term) error {
				start := time.Now()
				sleepCtx(ctx, spec.Hold)
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				report(childReport{Event: "term", Term: t.Number, Start: start.UnixNano(), End: time.Now().UnixNano()})
				return nil
			})
			if err != nil {
				return fail("Lead: %v", err)
			}
			sleepCtx(ctx, spec.Pause)
		}
		return 0
	case "lead":
		err := c.Run(ctx, func(ctx context.Context, t election.Term) error {
			report(childReport{Event: "leading", Term: t.Number})
			<-ctx.Done()
			return nil
		})
		return fail("Run returned before the process was killed: %v", err)
	}
	return fail("unknown mode %q", spec.Mode)
}

// childProcess is a child started by the suite.
type childProcess struct {
	cmd     *exec.Cmd
	reports chan childReport // closed when its output ends
	stderr  *syncbuf.Buffer
	done    chan struct{} // closed when the process has been waited for
	err     error         // its exit, set before done is closed
	// describe returns the process's output that was not a report.
	describe func() string
}

// startChild starts this test binary again as a candidate process doing
// spec. t's cleanup kills it if it still runs and waits for it.
func (s *suite) startChild(t testing.TB, spec childSpec) *childProcess {
	t.Helper()
	spec.URL, spec.TTL = s.h.URL, s.h.TTL
	spec.Timeout = s.h.Timeout
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &childProcess{cmd: cmd, reports: make(chan childReport, 64), stderr: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a candidate process: %v", err)
	}
	var other []string
	var mu sync.Mutex
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), reportPrefix)
			if !ok {
				mu.Lock()
				other = append(other, sc.Text())
				mu.Unlock()
				continue
			}
			var r childReport
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				r = childReport{Event: "error", Err: fmt.Sprintf("unreadable report %q: %v", line, err)}
			}
			p.reports <- r
		}
		close(p.reports)
		p.err = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	p.describe = func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("other output %q, stderr %q", other, p.stderr.String())
	}
	return p
}

// next returns the child's next report, failing t when its output ends
// first or ctx ends.
func (p *childProcess) next(ctx context.Context, t testing.TB, what string) childReport {
	t.Helper()
	select {
	case r, ok := <-p.reports:
		switch {
		case !ok:
			t.Fatalf("%s: the candidate process ended without reporting (does TestMain call electiontest.Child first?): %s", what, p.describe())
		case r.Event == "error":
			t.Fatalf("%s: the candidate process failed: %s", what, r.Err)
		}
		return r
	case <-ctx.Done():
		t.Fatalf("%s: no report from the candidate process: %v; %s", what, ctx.Err(), p.describe())
	}
	return childReport{}
}

// processesOneLeader: three candidate processes each lead three short
// terms on the store; by their wall clocks (one machine), no two terms
// overlap and the terms strictly increase.
func processesOneLeader(ctx context.Context, t *testing.T, s *suite) {
	if s.h.URL == "" {
		t.Skip("Harness.URL is empty: the store cannot be shared with other processes")
	}
	office := s.office("processes")
	const processes, terms = 3, 3
	var children []*childProcess
	for i := range processes {
		children = append(children, s.startChild(t, childSpec{
			Office: office, ID: fmt.Sprintf("proc-%d", i), Mode: "contend",
			Terms: terms, Hold: s.h.TTL / 5, Pause: s.h.TTL / 2,
		}))
	}
	var spans []span
	for i, p := range children {
		for range terms {
			r := p.next(ctx, t, fmt.Sprintf("process %d", i))
			spans = append(spans, span{term: r.Term, leader: fmt.Sprintf("proc-%d", i), start: time.Unix(0, r.Start), end: time.Unix(0, r.End), ended: true})
		}
		select {
		case <-p.done:
			if p.err != nil {
				t.Errorf("process %d: %v; %s", i, p.err, p.describe())
			}
		case <-ctx.Done():
			t.Fatalf("process %d did not exit after its terms: %s", i, p.describe())
		}
	}
	sortSpans(spans)
	if err := checkSpans(spans); err != nil {
		t.Error(err)
	}
	t.Logf("%d terms in %d processes; handoffs %s", len(spans), processes, handoffs(spans))
}

// killedProcessReplaced: a candidate process leads; it is killed with
// SIGKILL (no release, no goodbye); a candidate in this process that
// stood by leads within the ttl plus the store's expiry lag, with a larger
// term.
func killedProcessReplaced(ctx context.Context, t *testing.T, s *suite) {
	if s.h.URL == "" {
		t.Skip("Harness.URL is empty: the store cannot be shared with other processes")
	}
	office := s.office("killed")
	p := s.startChild(t, childSpec{Office: office, ID: "doomed", Mode: "lead"})
	r := p.next(ctx, t, "the process's election")
	g := s.newLedger(office)
	ch := make(chan elect, 4)
	b, _ := s.candidate(t, office, "b", newEvents("b", ch).options()...)
	rb := run(ctx, t, b, false, g.work(0, 0))
	sleepCtx(ctx, s.h.TTL/3)

	killed := time.Now()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill the leader's process: %v", err)
	}
	e := elected(ctx, t, "b after the leader's process was killed", ch)
	if e.term.Number <= r.Term {
		t.Errorf("b was elected with term %d after the killed leader's term %d; want a larger one", e.term.Number, r.Term)
	}
	sb, _ := g.find(e.term.Number)
	took := sb.start.Sub(killed)
	if bound := s.h.replaceBound(); took > bound {
		t.Errorf("b led %s after the leader's process was killed; want within %s (ttl %s + expiry lag %s + slack)", took, bound, s.h.TTL, s.h.ExpiryLag)
	}
	rb.cancel()
	noError(t, "b's Run", rb.wait(ctx, t, "b's Run"))
	t.Logf("b led %s after the leader's process was killed (ttl %s)", took.Round(time.Millisecond), s.h.TTL)
}
