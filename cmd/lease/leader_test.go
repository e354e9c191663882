package main

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// readUint reads the number a command wrote to path.
func readUint(t *testing.T, path string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(strings.TrimSpace(readFile(t, path)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// leaderLoop is a command that notes its term and start, then runs until
// SIGTERM, which it answers by finishing (0.3s) and noting the time. The
// trap is set before the start is noted, so a test that signals once it
// sees the start never finds the shell without it (exit 143).
const leaderLoop = `trap 'sleep 0.3; date +%s%N > "$DIR/$WHO-end"; exit 0' TERM
echo $$ > "$DIR/$WHO-pid"; echo "$LEASE_TERM" > "$DIR/$WHO-term"; date +%s%N > "$DIR/$WHO-start"
while :; do sleep 0.05; done`

func skipOnWindows(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("process groups and signals are Unix")
	}
}

// SIGTERM to the leader: its command winds down, and only once it has
// exited does the standby's command start, with a larger term.
func TestLeaderHandoff(t *testing.T) {
	t.Parallel()
	skipOnWindows(t)
	forEachStore(t, func(t *testing.T, backend string) {
		dir := t.TempDir()
		name := uniqueName(t)
		env := []string{"LEASE_BACKEND=" + backend, "DIR=" + dir}
		a := start(t, leaseBin, append(env, "WHO=a"), "leader", "--ttl", "2s", "--id", "a", name, "--", "sh", "-c", leaderLoop)
		waitFor(t, "a's command to start", func() bool { return fileExists(filepath.Join(dir, "a-start")) })
		b := start(t, leaseBin, append(env, "WHO=b"), "leader", "-v", "--ttl", "2s", "--id", "b", name, "--", "sh", "-c", leaderLoop)
		waitFor(t, "b to stand by", func() bool { return strings.Contains(b.stderr.String(), "campaigning") })
		if fileExists(filepath.Join(dir, "b-start")) {
			t.Fatal("b's command started while a led")
		}
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		if res := a.wait(t); res.code != 0 {
			t.Fatalf("lease leader a after SIGTERM: want its command's exit 0\n%s", res)
		}
		waitFor(t, "b's command to start", func() bool { return fileExists(filepath.Join(dir, "b-start")) })
		aEnd, bStart := readUint(t, filepath.Join(dir, "a-end")), readUint(t, filepath.Join(dir, "b-start"))
		if bStart < aEnd {
			t.Errorf("b's command started at %d, before a's had exited at %d: the terms overlapped", bStart, aEnd)
		}
		if at, bt := readUint(t, filepath.Join(dir, "a-term")), readUint(t, filepath.Join(dir, "b-term")); bt <= at {
			t.Errorf("b's term %d is not larger than a's %d", bt, at)
		}
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		if res := b.wait(t); res.code != 0 {
			t.Fatalf("lease leader b after SIGTERM: want exit 0\n%s", res)
		}
		if res := runLease(t, env, "observe", "--once", name); res.code != exitNotHeld {
			t.Errorf("observe --once after both resigned: want exit %d\n%s", exitNotHeld, res)
		}
	})
}

// One term per run: the command's exit code is lease's, the office is
// free afterwards, and each term's number (LEASE_TERM, the fencing
// token LEASE_TOKEN) is larger than the last.
func TestLeaderTermsIncrease(t *testing.T) {
	t.Parallel()
	skipOnWindows(t)
	forEachStore(t, func(t *testing.T, backend string) {
		env := []string{"LEASE_BACKEND=" + backend}
		name := uniqueName(t)
		var last uint64
		for i, code := range []int{0, 3, 7} {
			res := runLease(t, env, "leader", "--ttl", "2s", name, "--", "sh", "-c", `echo "$LEASE_TERM $LEASE_TOKEN $LEASE_LEADER"; exit `+strconv.Itoa(code))
			if res.code != code {
				t.Fatalf("term %d: want exit %d\n%s", i, code, res)
			}
			f := strings.Fields(res.stdout)
			if len(f) != 3 || f[0] != f[1] || f[2] == "" {
				t.Fatalf("term %d: the command printed %q, want TERM TOKEN LEADER with TERM = TOKEN", i, res.stdout)
			}
			n, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil || n <= last {
				t.Fatalf("term %d: LEASE_TERM %q, want a number larger than %d", i, f[0], last)
			}
			last = n
		}
	})
}

// A leader killed with SIGKILL takes its command with it, and the standby
// leads once the lease has expired.
func TestLeaderKilledIsReplaced(t *testing.T) {
	t.Parallel()
	skipOnWindows(t)
	forEachStore(t, func(t *testing.T, backend string) {
		dir := t.TempDir()
		name := uniqueName(t)
		env := []string{"LEASE_BACKEND=" + backend, "DIR=" + dir}
		a := start(t, leaseBin, append(env, "WHO=a"), "leader", "--ttl", "2s", name, "--", "sh", "-c", leaderLoop)
		waitFor(t, "a's command to start", func() bool { return fileExists(filepath.Join(dir, "a-start")) })
		b := start(t, leaseBin, append(env, "WHO=b"), "leader", "--ttl", "2s", name, "--", "sh", "-c", leaderLoop)
		_ = a.cmd.Process.Kill()
		a.wait(t)
		pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(dir, "a-pid"))))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a's command to be killed with it", func() bool { return !alive(pid) })
		waitFor(t, "b's command to start", func() bool { return fileExists(filepath.Join(dir, "b-start")) })
		if at, bt := readUint(t, filepath.Join(dir, "a-term")), readUint(t, filepath.Join(dir, "b-term")); bt <= at {
			t.Errorf("b's term %d is not larger than a's %d", bt, at)
		}
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		if res := b.wait(t); res.code != 0 {
			t.Fatalf("lease leader b after SIGTERM: want exit 0\n%s", res)
		}
	})
}

// A standby told to stop exits 0 without running its command; one with
// --timeout gives up with 75; a leader whose lease is taken away stops
// its command and exits 70.
func TestLeaderStandbyExitsOnSignal(t *testing.T) {
	t.Parallel()
	skipOnWindows(t)
	forEachStore(t, func(t *testing.T, backend string) {
		dir := t.TempDir()
		name := uniqueName(t)
		env := []string{"LEASE_BACKEND=" + backend, "DIR=" + dir}
		a := start(t, leaseBin, append(env, "WHO=a"), "leader", "--ttl", "2s", "--id", "a", name, "--", "sh", "-c", leaderLoop)
		waitFor(t, "a's command to start", func() bool { return fileExists(filepath.Join(dir, "a-start")) })
		b := start(t, leaseBin, append(env, "WHO=b"), "leader", "-v", "--ttl", "2s", name, "--", "sh", "-c", leaderLoop)
		waitFor(t, "b to stand by", func() bool { return strings.Contains(b.stderr.String(), "campaigning") })
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		if res := b.wait(t); res.code != 0 {
			t.Errorf("a standby after SIGTERM: want exit 0\n%s", res)
		}
		res := runLease(t, append(env, "WHO=c"), "leader", "--ttl", "2s", "--timeout", "500ms", name, "--", "sh", "-c", leaderLoop)
		if res.code != exitBusyDflt || !oneLineWith(res.stderr, "gave up standing by", "a") {
			t.Errorf("a standby with --timeout: want exit %d naming the leader\n%s", exitBusyDflt, res)
		}
		for _, who := range []string{"b", "c"} {
			if fileExists(filepath.Join(dir, who+"-start")) {
				t.Errorf("%s's command ran although it never led", who)
			}
		}
		if res := runLease(t, env, "release", "--force", name); res.code != 0 {
			t.Fatalf("release --force: %s", res)
		}
		if res := a.wait(t); res.code != exitLost || !strings.Contains(res.stderr, "lost") {
			t.Errorf("a leader whose lease was taken: want exit %d saying so\n%s", exitLost, res)
		}
	})
}

func TestObserveOnce(t *testing.T) {
	t.Parallel()
	skipOnWindows(t)
	forEachStore(t, func(t *testing.T, backend string) {
		dir := t.TempDir()
		name := uniqueName(t)
		env := []string{"LEASE_BACKEND=" + backend, "DIR=" + dir}
		if res := runLease(t, env, "observe", "--once", name); res.code != exitNotHeld || !strings.Contains(res.stdout, "no leader") {
			t.Errorf("observe --once with no leader: want exit %d and \"no leader\"\n%s", exitNotHeld, res)
		}
		a := start(t, leaseBin, append(env, "WHO=a"), "leader", "--ttl", "2s", "--id", "node-a", "--meta", "10.0.0.5:8080", name, "--", "sh", "-c", leaderLoop)
		// a-start is written after a-term: a-term can exist and still be
		// empty, and an empty term would let the text check below pass.
		waitFor(t, "a's command to start", func() bool { return fileExists(filepath.Join(dir, "a-start")) })
		term := strconv.FormatUint(readUint(t, filepath.Join(dir, "a-term")), 10)
		res := runLease(t, env, "observe", "--once", name)
		if res.code != 0 || !strings.Contains(res.stdout, "leader node-a, term "+strings.TrimSpace(term)) || !strings.Contains(res.stdout, "10.0.0.5:8080") {
			t.Errorf("observe --once with a leader: want exit 0 naming node-a, its term %s and metadata\n%s", term, res)
		}
		res = runLease(t, env, "observe", "--once", "--json", name)
		var v termJSON
		if err := json.Unmarshal([]byte(res.stdout), &v); err != nil || res.code != 0 || v.Leader == nil || *v.Leader != "node-a" || v.Metadata != "10.0.0.5:8080" || strconv.FormatUint(v.Term, 10) != strings.TrimSpace(term) {
			t.Errorf("observe --once --json: want node-a's term as one object (%v)\n%s", err, res)
		}
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		a.wait(t)
	})
}

// The stream of a follower: starts with "no leader", shows each leader,
// never a term older than one it showed, and ends with exit 0 on SIGTERM.
func TestObserveNeverGoesBack(t *testing.T) {
	t.Parallel()
	skipOnWindows(t)
	forEachStore(t, func(t *testing.T, backend string) {
		name := uniqueName(t)
		env := []string{"LEASE_BACKEND=" + backend}
		obs := start(t, leaseBin, env, "observe", "--json", "--interval", "100ms", name)
		waitFor(t, "the first line", func() bool { return strings.Contains(obs.stdout.String(), "\n") })
		for i := range 3 {
			if res := runLease(t, env, "leader", "--ttl", "2s", "--id", "n"+strconv.Itoa(i), name, "--", "sleep", "0.5"); res.code != 0 {
				t.Fatalf("leader %d: %s", i, res)
			}
		}
		_ = obs.cmd.Process.Signal(syscall.SIGTERM)
		res := obs.wait(t)
		if res.code != 0 {
			t.Fatalf("observe after SIGTERM: want exit 0\n%s", res)
		}
		lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
		var highest uint64
		leaders := 0
		for i, line := range lines {
			var v termJSON
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Fatalf("line %d %q is not one JSON object: %v", i, line, err)
			}
			if i == 0 && v.Leader != nil {
				t.Errorf("first line %q: want no leader", line)
			}
			if v.Leader == nil {
				continue
			}
			leaders++
			if v.Term < highest {
				t.Errorf("line %d: term %d after term %d", i, v.Term, highest)
			}
			highest = max(highest, v.Term)
		}
		if leaders == 0 {
			t.Errorf("observe saw no leader in three terms of 0.5s\n%s", res)
		}
	})
}

// Mistakes are one line and exit 2.
func TestLeaderUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"leader"},
		{"leader", "name"},
		{"leader", "name", "true"},
		{"leader", "--ttl", "30x", "name", "--", "true"},
		{"leader", "--ttl", "-1s", "name", "--", "true"},
		{"leader", "--id", "a b", "name", "--", "true"},
		{"observe"},
		{"observe", "a", "b"},
		{"observe", "--interval", "0s", "name"},
	} {
		res := runLease(t, []string{"LEASE_BACKEND=" + sqliteURL(t)}, args...)
		lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
		if res.code != exitUsage || len(lines) != 1 || !strings.HasPrefix(lines[0], "lease: ") {
			t.Errorf("lease %s: want exit 2 and one line \"lease: ...\" on stderr\n%s", strings.Join(args, " "), res)
		}
	}
}
