//go:build unix

package main

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// alive reports whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		// pid (comm) state ...: the state follows the last ')'.
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
			return s[i+2] != 'Z'
		}
	} else if runtime.GOOS == "linux" {
		return false
	}
	return syscall.Kill(pid, 0) == nil
}
