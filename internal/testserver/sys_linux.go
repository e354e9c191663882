package testserver

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// setPdeathsig has the kernel send SIGKILL to a server when the thread
// that started it exits. spawn starts every server from one thread that
// lives as long as any server does, so that happens only when the test
// binary itself dies.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// spawner owns the locked OS thread that starts servers. Pdeathsig fires
// when the parent *thread* exits, and Go may end a thread when a locked
// goroutine returns, so servers are started from a goroutine that keeps
// its thread until every server it started has been reaped.
var spawner struct {
	mu   sync.Mutex
	live int // servers started and not yet reaped
	reqs chan *exec.Cmd
	errs chan error
	done chan struct{}
}

// spawn starts cmd from the spawner's thread.
func spawn(cmd *exec.Cmd) error {
	spawner.mu.Lock()
	defer spawner.mu.Unlock()
	if spawner.live == 0 {
		spawner.reqs = make(chan *exec.Cmd)
		spawner.errs = make(chan error)
		spawner.done = make(chan struct{})
		go spawnLoop(spawner.reqs, spawner.errs, spawner.done)
	}
	spawner.reqs <- cmd
	err := <-spawner.errs
	if err == nil {
		spawner.live++
	} else if spawner.live == 0 {
		stopSpawner()
	}
	return err
}

// released records that a server started by spawn has been reaped, and
// ends the spawner's thread after the last one.
func released() {
	spawner.mu.Lock()
	defer spawner.mu.Unlock()
	spawner.live--
	if spawner.live == 0 {
		stopSpawner()
	}
}

// stopSpawner ends the spawner goroutine. spawner.mu must be held.
func stopSpawner() {
	close(spawner.reqs)
	<-spawner.done
}

func spawnLoop(reqs <-chan *exec.Cmd, errs chan<- error, done chan<- struct{}) {
	// Never unlocked: the thread ends with this goroutine, once no server
	// it started is alive.
	runtime.LockOSThread()
	defer close(done)
	for cmd := range reqs {
		errs <- cmd.Start()
	}
}

// waitNoReap waits until process pid exits, leaving it a zombie (waitid
// with WNOWAIT), and reports true; cmd.Wait reaps it afterwards.
func waitNoReap(pid int) bool {
	const (
		pPID    = 1         // P_PID
		wExited = 0x4       // WEXITED
		wNoWait = 0x1000000 // WNOWAIT
	)
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
		switch errno {
		case 0:
			return true
		case syscall.EINTR:
			continue
		default:
			return false
		}
	}
}

// descendants returns the ids of the processes below pid, found through
// /proc. Servers such as PostgreSQL put each child in a session of its
// own (setsid), out of reach of a signal to the server's process group.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		id, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(id); ok {
			children[ppid] = append(children[ppid], id)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 && len(out) < 10000 {
		next := queue[0]
		queue = queue[1:]
		out = append(out, children[next]...)
		queue = append(queue, children[next]...)
	}
	return out
}

// parentOf reads the parent id of process id from /proc/id/stat.
func parentOf(id int) (int, bool) {
	stat, ok := procStat(id)
	if !ok {
		return 0, false
	}
	f := strings.Fields(stat)
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// procStat is the part of /proc/id/stat after the command name: state,
// parent id, and the rest.
func procStat(id int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(id) + "/stat")
	if err != nil {
		return "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", false
	}
	return s[i+1:], true
}

// gone reports whether process id has exited (a zombie counts: it runs
// no more code and holds no sockets).
func gone(id int) bool {
	stat, ok := procStat(id)
	if !ok {
		return true
	}
	f := strings.Fields(stat)
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}
