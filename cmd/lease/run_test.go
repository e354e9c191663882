package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// The README's command works with nothing configured: the default store
// is a SQLite file in the user's cache directory.
func TestRunDefaultBackend(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	env := []string{"HOME=" + home, "XDG_CACHE_HOME=" + filepath.Join(home, "cache")}
	res := runLease(t, env, "run", "nightly", "--", "echo", "hello")
	if res.code != 0 || res.stdout != "hello\n" {
		t.Fatalf("lease run nightly -- echo hello: want exit 0 and hello\n%s", res)
	}
	if runtime.GOOS == "linux" && !fileExists(filepath.Join(home, "cache", "lease", "lease.db")) {
		t.Errorf("no SQLite file under $XDG_CACHE_HOME/lease after a run")
	}
	if res := runLease(t, env, "status", "nightly"); res.code != exitNotHeld {
		t.Errorf("status after the run: want exit %d (not held: released)\n%s", exitNotHeld, res)
	}
}

func TestRunGivesTheCommandItsLease(t *testing.T) {
	t.Parallel()
	env := []string{"LEASE_BACKEND=" + sqliteURL(t)}
	const script = `echo "$LEASE_NAME|$LEASE_OWNER|$LEASE_TOKEN"`
	var tokens []uint64
	for _, owner := range []string{"", "deploy-bot"} {
		args := []string{"run"}
		if owner != "" {
			args = append(args, "--owner", owner)
		}
		res := runLease(t, env, append(args, "db migrate", "--", "sh", "-c", script)...)
		if res.code != 0 {
			t.Fatalf("run: %s", res)
		}
		f := strings.Split(strings.TrimSpace(res.stdout), "|")
		if len(f) != 3 {
			t.Fatalf("the command printed %q, want NAME|OWNER|TOKEN", res.stdout)
		}
		if f[0] != "db migrate" {
			t.Errorf("LEASE_NAME=%q, want %q", f[0], "db migrate")
		}
		if f[1] == "" || (owner != "" && f[1] != owner) {
			t.Errorf("LEASE_OWNER=%q, want %q (or a generated owner when empty)", f[1], owner)
		}
		tok, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil || tok == 0 {
			t.Fatalf("LEASE_TOKEN=%q is not a positive integer", f[2])
		}
		tokens = append(tokens, tok)
	}
	if tokens[1] <= tokens[0] {
		t.Errorf("the second run got token %d, not larger than the first's %d", tokens[1], tokens[0])
	}
}

func TestRunPassesExitCodes(t *testing.T) {
	t.Parallel()
	env := []string{"LEASE_BACKEND=" + sqliteURL(t)}
	for _, tc := range []struct {
		argv []string
		want int
	}{
		{[]string{"true"}, 0},
		{[]string{"sh", "-c", "exit 7"}, 7},
		{[]string{"sh", "-c", "exit 75"}, 75},
		{[]string{"sh", "-c", "kill -TERM $$"}, 128 + 15},
		{[]string{"lease-test-no-such-command"}, 127},
	} {
		res := runLease(t, env, append([]string{"run", "codes", "--"}, tc.argv...)...)
		if res.code != tc.want {
			t.Errorf("lease run codes -- %s: want exit %d\n%s", strings.Join(tc.argv, " "), tc.want, res)
		}
		if res := runLease(t, env, "status", "codes"); res.code != exitNotHeld {
			t.Errorf("status after lease run -- %s: want exit %d (released)\n%s", strings.Join(tc.argv, " "), exitNotHeld, res)
		}
	}
}

// Two lease runs on one name: the second finds it busy, says who holds
// it, exits with the busy code and does not run its command; with --wait
// it runs once the first is done.
func TestRunBusy(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, backend string) {
		dir := t.TempDir()
		env := []string{"LEASE_BACKEND=" + backend, "DIR=" + dir}
		name := uniqueName(t)
		holder := start(t, leaseBin, env, "run", "--ttl", "30s", name, "--", "sh", "-c",
			`echo "$LEASE_OWNER" > "$DIR/owner"; touch "$DIR/started"; while [ ! -e "$DIR/stop" ]; do sleep 0.05; done; echo done`)
		waitFor(t, "the first command to start", func() bool { return fileExists(filepath.Join(dir, "started")) })
		owner := readFile(t, filepath.Join(dir, "owner"))

		res := runLease(t, env, "run", name, "--", "echo", "second ran")
		if res.code != exitBusyDflt {
			t.Fatalf("second lease run on a held name: want exit %d\n%s", exitBusyDflt, res)
		}
		if strings.Contains(res.stdout, "second ran") {
			t.Fatalf("the second command ran while the first held the lease\n%s", res)
		}
		if !strings.Contains(res.stderr, "held by "+owner) || strings.Count(res.stderr, "\n") != 1 || !strings.HasPrefix(res.stderr, "lease: ") {
			t.Errorf("busy message should be one line naming the holder %q\n%s", owner, res)
		}
		if res := runLease(t, env, "run", "--conflict-exit-code", "9", name, "--", "true"); res.code != 9 {
			t.Errorf("--conflict-exit-code 9: want exit 9\n%s", res)
		}

		// status and list see the holder.
		res = runLease(t, env, "status", name)
		if res.code != 0 || !strings.Contains(res.stdout, owner) {
			t.Errorf("status of a held name: want exit 0 naming %q\n%s", owner, res)
		}
		res = runLease(t, env, "status", "--json", name)
		var st leaseJSON
		if err := json.Unmarshal([]byte(res.stdout), &st); err != nil || !st.Held || st.Owner != owner || st.Token == 0 || st.RemainingMS <= 0 {
			t.Errorf("status --json: got %+v (%v)\n%s", st, err, res)
		}

		waiter := start(t, leaseBin, env, "run", "--wait", "2m", name, "--", "echo", "waiter ran")
		if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if res := holder.wait(t); res.code != 0 || res.stdout != "done\n" {
			t.Errorf("first lease run: want exit 0 and done\n%s", res)
		}
		if res := waiter.wait(t); res.code != 0 || res.stdout != "waiter ran\n" {
			t.Errorf("lease run --wait: want it to run once the holder finished\n%s", res)
		}
		if res := runLease(t, env, "status", name); res.code != exitNotHeld {
			t.Errorf("status after both runs: want exit %d\n%s", exitNotHeld, res)
		}
	})
}
