package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// loadAvg returns the 1, 5 and 15 minute load averages from /proc/loadavg,
// or a note saying why it cannot.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown (no /proc/loadavg)"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// machine describes the Go runtime, OS and CPUs this run measures with.
func machine() string {
	return fmt.Sprintf("%s %s/%s, %d CPUs (GOMAXPROCS %d)", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0))
}

func numCPU() int { return runtime.GOMAXPROCS(0) }
