//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A lease run killed with SIGKILL cannot stop its command itself: the
// command and everything it started must still die within a second, so
// that nothing runs on without the lease.
func TestKilledLeaseTakesTheCommandWithIt(t *testing.T) {
	dir := t.TempDir()
	env := []string{"LEASE_BACKEND=" + sqliteURL(t), "DIR=" + dir}
	// The command starts a grandchild in its process group and waits.
	p := start(t, leaseBin, env, "run", "--ttl", "30s", "orphan", "--", "sh", "-c", `
		sleep 1000 &
		echo $! > "$DIR/grandchild.tmp" && mv "$DIR/grandchild.tmp" "$DIR/grandchild"
		echo $$ > "$DIR/child.tmp" && mv "$DIR/child.tmp" "$DIR/child"
		wait`)
	waitFor(t, "the command and its grandchild to start", func() bool {
		return fileExists(filepath.Join(dir, "child")) && fileExists(filepath.Join(dir, "grandchild"))
	})
	pids := map[string]int{}
	for _, who := range []string{"child", "grandchild"} {
		pid, err := strconv.Atoi(readFile(t, filepath.Join(dir, who)))
		if err != nil {
			t.Fatal(err)
		}
		pids[who] = pid
		// Whatever happens below, leave nothing behind.
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}

	if err := p.cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-p.done
	for _, who := range []string{"child", "grandchild"} {
		pid := pids[who]
		for alive(pid) && time.Since(killed) < 3*time.Second {
			time.Sleep(10 * time.Millisecond)
		}
		switch gone := time.Since(killed); {
		case alive(pid):
			t.Errorf("the command's %s (pid %d) still runs 3s after lease was killed", who, pid)
		case gone > time.Second:
			t.Errorf("the command's %s (pid %d) took %s to die after lease was killed, want at most 1s", who, pid, gone.Round(time.Millisecond))
		}
	}
}
