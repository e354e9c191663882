package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestSumFields(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:2.500000\r\nused_cpu_sys_children:9.000000\r\n"
	got, err := sumFields(info, ":", "used_cpu_user", "used_cpu_sys")
	if err != nil || got != 3750*time.Millisecond {
		t.Errorf("Redis INFO cpu: got %v, %v; want 3.75s (the _children fields are not the server's)", got, err)
	}
	prom := "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.34\n"
	got, err = sumFields(prom, " ", "process_cpu_seconds_total")
	if err != nil || got != 12340*time.Millisecond {
		t.Errorf("etcd /metrics: got %v, %v; want 12.34s", got, err)
	}
	if _, err := sumFields("used_cpu_sys:1\n", ":", "used_cpu_user", "used_cpu_sys"); err == nil {
		t.Error("a missing field gave no error: the run would report a server CPU it never read")
	}
	if _, err := sumFields("process_cpu_seconds_total x\n", " ", "process_cpu_seconds_total"); err == nil {
		t.Error("a value that is not a number gave no error")
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"postgres://postgres@127.0.0.1:5432/test?sslmode=disable": true,
		"mysql://root@localhost:3306/test":                        true,
		"mysql://root@[::1]:3306/test":                            true,
		"127.0.0.1:2379":                                          true,
		"postgres://db.example.com/test":                          false,
		"10.0.0.5:2379":                                           false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// procCPU finds this test's own process by its command name and counts
// the CPU it burns.
func TestProcCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The kernel keeps the first 15 bytes of the name.
	comm := filepath.Base(exe)
	if len(comm) > 15 {
		comm = comm[:15]
	}
	before, err := procCPU([]string{comm})
	if err != nil {
		t.Fatal(err)
	}
	c0, _ := selfCPU()
	for x := 0; ; x++ {
		if c, _ := selfCPU(); c-c0 > 100*time.Millisecond || x > 1e9 {
			break
		}
	}
	after, err := procCPU([]string{comm})
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 50*time.Millisecond {
		t.Errorf("procCPU(%q) grew by %v while the test burned over 100ms of CPU", comm, after-before)
	}
	if _, err := procCPU([]string{"no-such-process-name"}); err == nil || !strings.Contains(err.Error(), "no process") {
		t.Errorf("procCPU of a name nothing runs under: %v; want an error saying so", err)
	}
}

func TestCPUUseString(t *testing.T) {
	u := cpuUse{client: 40 * time.Millisecond, server: 30 * time.Millisecond, serverKnown: true, ops: 1000, elapsed: 100 * time.Millisecond}
	if got, want := u.String(), "client 40µs/op (40% of a CPU), server 30µs/op (30% of a CPU)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	u.serverKnown = false
	if got := u.String(); strings.Contains(got, "server") {
		t.Errorf("a server CPU that was not read is printed: %q", got)
	}
	var sum cpuUse
	sum.add(cpuUse{client: time.Millisecond, server: time.Millisecond, serverKnown: true, ops: 10, elapsed: time.Second})
	sum.add(cpuUse{client: time.Millisecond, ops: 10, elapsed: time.Second})
	if sum.serverKnown {
		t.Error("a sum with a round whose server CPU is unknown claims to know the server's CPU")
	}
}
