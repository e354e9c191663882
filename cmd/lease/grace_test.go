//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasekit/lease/backend/memory"
)

// When renewals stop succeeding, COMMAND gets SIGTERM --grace before the
// lease's Deadline and SIGKILL just before it: a command that ignores
// SIGTERM is gone by the Deadline, before the store can give the lease to
// anyone else.
func TestRunStopsTheCommandByTheDeadline(t *testing.T) {
	store := &slowLocker{Locker: memory.New(), stallRenew: true}
	backend := registerLocker(t, store)
	dir := t.TempDir()
	const grace = time.Second
	script := `trap 'touch ` + dir + `/term' TERM; echo $$ > ` + dir + `/pid.tmp; mv ` + dir + `/pid.tmp ` + dir + `/pid; while :; do sleep 0.05; done`
	done := make(chan result, 1)
	go func() {
		done <- runInProcess(t, "--backend", backend, "run", "--ttl", "3s", "--grace", grace.String(), "stuck", "--", "sh", "-c", script)
	}()
	waitFor(t, "the command to start", func() bool { return fileExists(filepath.Join(dir, "pid")) })
	pid, err := strconv.Atoi(readFile(t, filepath.Join(dir, "pid")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	deadline := store.lastDeadline()

	// No SIGTERM before Deadline - grace (with room for a slow file
	// system and a loaded machine).
	time.Sleep(time.Until(deadline.Add(-grace - 300*time.Millisecond)))
	if fileExists(filepath.Join(dir, "term")) {
		t.Errorf("the command got SIGTERM more than --grace before the lease's Deadline")
	}
	var died time.Time
	for limit := deadline.Add(5 * time.Second); time.Now().Before(limit); time.Sleep(2 * time.Millisecond) {
		if !alive(pid) {
			died = time.Now()
			break
		}
	}
	switch {
	case died.IsZero():
		t.Fatalf("the command still ran 5s after the lease's Deadline")
	case died.After(deadline):
		t.Errorf("the command died %s after the lease's Deadline, want it gone by the Deadline", died.Sub(deadline).Round(time.Millisecond))
	default:
		t.Logf("the command was gone %s before the lease's Deadline", deadline.Sub(died).Round(time.Millisecond))
	}
	if !fileExists(filepath.Join(dir, "term")) {
		t.Errorf("the command never got SIGTERM before SIGKILL")
	}
	var res result
	select {
	case res = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("lease run did not return a minute after its command was killed")
	}
	if res.code != exitLost || !leaseLineWith(res.stderr, "stopped", "renew", grace.String()) {
		t.Errorf("lease run whose renewals never succeeded: want exit %d and one line saying the command was stopped\n%s", exitLost, res)
	}
	if n := store.granted(); n != 1 {
		t.Errorf("the store granted %d leases, want only the first Acquire (every renewal stalls)", n)
	}
	_ = os.Remove(filepath.Join(dir, "term"))
}

// lastDeadline is the Deadline of the newest lease the store granted.
func (s *slowLocker) lastDeadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.deadlines) == 0 {
		return time.Time{}
	}
	return s.deadlines[len(s.deadlines)-1]
}

// leaseLineWith is oneLineWith for a stderr that the command writes to
// as well: exactly one of its lines comes from lease.
func leaseLineWith(s string, subs ...string) bool {
	var mine []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "lease: ") {
			mine = append(mine, l)
		}
	}
	return len(mine) == 1 && containsAll(mine[0], subs...)
}
