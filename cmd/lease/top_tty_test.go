//go:build linux

package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestTopClearsTheTerminal checks that lease top on a terminal clears the
// screen before each table, and that an interrupt ends a watch without
// --count with exit 0.
func TestTopClearsTheTerminal(t *testing.T) {
	master, tty := openPTY(t)
	scr := readScreen(master)
	env := []string{"LEASE_BACKEND=" + sqliteURL(t)}
	cmd := startOnTTY(t, tty, env, nil, leaseBin, "top", "--interval", "20ms", "--count", "3")
	if code := waitExit(t, cmd, time.Minute, "lease top --count 3"); code != 0 {
		t.Fatalf("lease top on a terminal: exit %d\n%s", code, scr)
	}
	waitFor(t, "the three tables on the screen", func() bool { return strings.Count(scr.String(), "0 leases held") == 3 })
	if n := strings.Count(scr.String(), clearScreen); n != 3 {
		t.Errorf("lease top on a terminal cleared the screen %d times, want once per table (3)\n%q", n, scr)
	}

	p := start(t, leaseBin, env, "top", "--interval", "20ms")
	waitFor(t, "lease top to show a table", func() bool { return strings.Contains(p.stdout.String(), "0 leases held") })
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if res := p.wait(t); res.code != 0 || res.stderr != "" {
		t.Errorf("lease top after SIGINT: want exit 0 and nothing on stderr\n%s", res)
	}
}
