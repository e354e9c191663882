package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A lease taken away while the command runs (an operator's release
// --force from another process, found by the holder's next renewal)
// stops the command's whole process group: SIGTERM, then SIGKILL after
// the grace period for what ignores it. lease exits with the lost code.
func TestRunStopsTheCommandWhenTheLeaseIsLost(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("process groups and signals are Unix")
	}
	forEachStore(t, func(t *testing.T, backend string) {
		dir := t.TempDir()
		env := []string{"LEASE_BACKEND=" + backend, "DIR=" + dir}
		name := uniqueName(t)
		// The command ignores SIGTERM (after noting it) and starts a
		// grandchild that ignores it too: only the group SIGKILL ends them.
		holder := start(t, leaseBin, env, "run", "--ttl", "6s", "--grace", "1s", name, "--", "sh", "-c", `
			trap 'echo term >> "$DIR/log"' TERM
			(trap '' TERM; exec sleep 1000) >/dev/null 2>&1 &
			echo $! > "$DIR/grandchild"
			touch "$DIR/started"
			while :; do sleep 0.1; done`)
		waitFor(t, "the command to start", func() bool { return fileExists(filepath.Join(dir, "started")) })
		grandchild, err := strconv.Atoi(readFile(t, filepath.Join(dir, "grandchild")))
		if err != nil {
			t.Fatal(err)
		}

		res := runLease(t, env, "release", "--force", name)
		if res.code != 0 || !strings.Contains(res.stdout, "released") {
			t.Fatalf("release --force of a held lease: want exit 0\n%s", res)
		}
		res = holder.wait(t)
		if res.code != exitLost || !strings.Contains(res.stderr, "lost") {
			t.Fatalf("lease run whose lease was taken away: want exit %d saying it was lost\n%s", exitLost, res)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "log")); !strings.Contains(string(got), "term") {
			t.Errorf("the command never got SIGTERM (log %q)", got)
		}
		waitFor(t, "the grandchild to be killed", func() bool { return !alive(grandchild) })
		if res := runLease(t, env, "release", "--force", name); res.code != exitNotHeld {
			t.Errorf("release --force of a free name: want exit %d\n%s", exitNotHeld, res)
		}
	})
}

// SIGINT to lease run goes to the command; lease exits with the command's
// code and releases the lease.
func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("signals are Unix")
	}
	dir := t.TempDir()
	env := []string{"LEASE_BACKEND=" + sqliteURL(t), "DIR=" + dir}
	p := start(t, leaseBin, env, "run", "interrupted", "--", "sh", "-c", `
		trap 'echo int > "$DIR/got"; exit 5' INT
		touch "$DIR/started"
		while :; do sleep 0.1; done`)
	waitFor(t, "the command to start", func() bool { return fileExists(filepath.Join(dir, "started")) })
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if res := p.wait(t); res.code != 5 {
		t.Fatalf("lease run after SIGINT: want the command's exit 5\n%s", res)
	}
	if got := readFile(t, filepath.Join(dir, "got")); got != "int" {
		t.Errorf("the command did not get SIGINT")
	}
	if res := runLease(t, env, "status", "interrupted"); res.code != exitNotHeld {
		t.Errorf("status after an interrupted run: want exit %d (released)\n%s", exitNotHeld, res)
	}
}

func TestListShowsHeldLeases(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"LEASE_BACKEND=" + sqliteURL(t), "DIR=" + dir}
	var holders []*proc
	// Each command marks its start in a file of its own. Not named by
	// $LEASE_TOKEN: tokens increase per name, so two names acquired in
	// the same millisecond can share one.
	for i, name := range []string{"jobs/a", "jobs/b", "other"} {
		holders = append(holders, start(t, leaseBin, env, "run", name, "--", "sh", "-c",
			fmt.Sprintf(`touch "$DIR/started-%d"; while [ ! -e "$DIR/stop" ]; do sleep 0.05; done`, i)))
	}
	waitFor(t, "three commands to start", func() bool {
		e, _ := os.ReadDir(dir)
		return len(e) == 3
	})
	res := runLease(t, env, "list", "jobs/")
	if res.code != 0 || !strings.Contains(res.stdout, "jobs/a") || !strings.Contains(res.stdout, "jobs/b") || strings.Contains(res.stdout, "other") {
		t.Errorf("list jobs/: want jobs/a and jobs/b only\n%s", res)
	}
	res = runLease(t, env, "list", "--json")
	var all []leaseJSON
	if err := json.Unmarshal([]byte(res.stdout), &all); err != nil || len(all) != 3 || all[0].Name != "jobs/a" || all[2].Name != "other" {
		t.Errorf("list --json: want the three leases in name order, got %+v (%v)\n%s", all, err, res)
	}
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, h := range holders {
		if res := h.wait(t); res.code != 0 {
			t.Errorf("holder: %s", res)
		}
	}
	if res := runLease(t, env, "list"); res.code != 0 || !strings.Contains(res.stdout, "no leases") {
		t.Errorf("list after every run ended: want no leases\n%s", res)
	}
}

// Ctrl-C while lease run --wait waits for a busy lease ends the wait: the
// command never runs and the holder keeps its lease.
func TestRunInterruptedWhileWaiting(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("signals are Unix")
	}
	dir := t.TempDir()
	env := []string{"LEASE_BACKEND=" + sqliteURL(t), "DIR=" + dir}
	holder := start(t, leaseBin, env, "run", "busy", "--", "sh", "-c",
		`touch "$DIR/started"; while [ ! -e "$DIR/stop" ]; do sleep 0.05; done`)
	waitFor(t, "the holder's command to start", func() bool { return fileExists(filepath.Join(dir, "started")) })
	waiter := start(t, leaseBin, env, "run", "--wait", "10m", "busy", "--", "touch", filepath.Join(dir, "waiter-ran"))
	// It says so once it waits, with its signal handling in place.
	waitFor(t, "the waiter to say it waits", func() bool { return strings.Contains(waiter.stderr.String(), "waiting") })
	if err := waiter.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	res := waiter.wait(t)
	if res.code != 128+int(syscall.SIGINT) || !strings.Contains(res.stderr, "interrupted") {
		t.Errorf("lease run --wait after SIGINT: want exit 130 saying it was interrupted\n%s", res)
	}
	if fileExists(filepath.Join(dir, "waiter-ran")) {
		t.Errorf("the waiter's command ran")
	}
	if res := runLease(t, env, "status", "busy"); res.code != 0 {
		t.Errorf("the holder lost its lease to an interrupted waiter\n%s", res)
	}
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if res := holder.wait(t); res.code != 0 {
		t.Errorf("holder: %s", res)
	}
}
