package testserver

import (
	"os/exec"
	"runtime"
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
