package testserver_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasekit/lease/internal/testserver"
)

// childEnv marks the copy of this test binary that TestServersDieWithTheTestBinary runs.
const childEnv = "TESTSERVER_ORPHAN_CHILD"

// TestServersDieWithTheTestBinary: a test binary killed with SIGKILL (no
// cleanup runs) takes its servers with it, Redis and PostgreSQL (which
// runs as another user) alike, through Pdeathsig.
func TestServersDieWithTheTestBinary(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		r := testserver.StartRedis(t, nil)
		fmt.Printf("SERVER %d %s %s\n", r.Pid(), r.Addr(), filepath.Dir(filepath.Dir(r.Dir())))
		pg := testserver.StartPostgres(t, nil)
		fmt.Printf("SERVER %d %s %s\n", pg.Pid(), pg.Addr(), pg.Dir())
		_ = os.Stdout.Sync()
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	if testing.Short() {
		t.Skip("starts a test binary with a PostgreSQL server")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServersDieWithTheTestBinary$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if bytes.Contains(out, []byte("--- SKIP")) {
		t.Skipf("the child test binary skipped:\n%s", out)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child test binary: %v, want killed by SIGKILL\nstdout:\n%s\nstderr:\n%s", err, out, stderr.Bytes())
	}
	type server struct {
		pid       int
		addr, dir string
	}
	var servers []server
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var s server
		if _, err := fmt.Sscanf(sc.Text(), "SERVER %d %s %s", &s.pid, &s.addr, &s.dir); err == nil {
			servers = append(servers, s)
		}
	}
	if len(servers) == 0 {
		t.Fatalf("the child started no server:\n%s", out)
	}
	for _, s := range servers {
		// The child's cleanup never ran: remove what it left on disk.
		if strings.HasPrefix(s.dir, os.TempDir()+string(filepath.Separator)) {
			t.Cleanup(func() { _ = os.RemoveAll(s.dir) })
		}
		deadline := time.Now().Add(10 * time.Second)
		for !refused(s.addr) || syscall.Kill(s.pid, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("server pid %d on %s still runs 10s after its test binary was killed", s.pid, s.addr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// A PostgreSQL killed this way leaves its small System V shared memory
	// segment behind (its postmaster.pid names it): remove it.
	for _, s := range servers {
		pid, err := os.ReadFile(filepath.Join(s.dir, "data", "postmaster.pid"))
		if err != nil {
			continue
		}
		lines := strings.Split(string(pid), "\n")
		if len(lines) < 7 {
			continue
		}
		var key, id int
		if _, err := fmt.Sscan(lines[6], &key, &id); err == nil {
			const ipcRMID = 0
			_, _, _ = syscall.Syscall(syscall.SYS_SHMCTL, uintptr(id), ipcRMID, 0)
		}
	}
	if len(servers) != 2 {
		t.Errorf("the child reported %d servers, want 2:\n%s", len(servers), out)
	}
}
