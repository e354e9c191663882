package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// The net mode's delaying proxies run in a child process: this command
// run again with proxyDelayEnv set, so that their CPU time is the child's
// (read from /proc) and not mixed into the client's, and so that their
// goroutines do not share the client's scheduler.
const (
	proxyDelayEnv   = "LEASEBENCH_PROXY_DELAY"   // one-way delay, a time.Duration
	proxyTargetsEnv = "LEASEBENCH_PROXY_TARGETS" // host:port, comma separated
)

// proxyChild reports whether this process is a proxy child, and if so
// serves until its stdin closes and returns the exit code.
func proxyChild() (int, bool) {
	d, ok := os.LookupEnv(proxyDelayEnv)
	if !ok {
		return 0, false
	}
	return serveProxyChild(d, os.Getenv(proxyTargetsEnv), os.Stdin, os.Stdout), true
}

// serveProxyChild starts a delaying proxy per target, writes "target
// addr" per line and then "ready" to out, and serves until in ends (the
// parent closed it, or died).
func serveProxyChild(delay, targets string, in io.Reader, out io.Writer) int {
	oneWay, err := time.ParseDuration(delay)
	if err != nil || oneWay < 0 {
		fmt.Fprintf(os.Stderr, "bench proxy: bad %s %q\n", proxyDelayEnv, delay)
		return 2
	}
	var proxies []*proxy
	defer func() {
		for _, p := range proxies {
			p.Close()
		}
	}()
	for _, t := range strings.Split(targets, ",") {
		if t == "" {
			continue
		}
		p, err := startDelayProxy(t, oneWay)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench proxy: %v\n", err)
			return 1
		}
		proxies = append(proxies, p)
		fmt.Fprintf(out, "%s %s\n", t, p.Addr())
	}
	fmt.Fprintln(out, "ready")
	_, _ = io.Copy(io.Discard, in)
	return 0
}

// proxyProcess is a running proxy child.
type proxyProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	oneWay time.Duration
	// via maps each target (host:port) to the proxy's address.
	via map[string]string
}

// startProxyProcess runs this command again as a proxy child that
// forwards to each of targets with oneWay of delay in each direction.
func startProxyProcess(targets []string, oneWay time.Duration) (*proxyProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start the proxy process: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), proxyDelayEnv+"="+oneWay.String(), proxyTargetsEnv+"="+strings.Join(targets, ","))
	cmd.Stderr = os.Stderr
	pp := &proxyProcess{cmd: cmd, oneWay: oneWay, via: map[string]string{}}
	if pp.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if pp.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the proxy process: %w", err)
	}
	lines := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(pp.stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				lines <- nil
				return
			}
			if t, addr, ok := strings.Cut(sc.Text(), " "); ok {
				pp.via[t] = addr
			}
		}
		lines <- errors.New("the proxy process ended before it was ready")
	}()
	select {
	case err = <-lines:
	case <-time.After(dialTimeout):
		err = errors.New("the proxy process was not ready after " + dialTimeout.String())
	}
	if err != nil {
		pp.Close()
		<-lines
		return nil, err
	}
	return pp, nil
}

// cpu is the CPU time (user and system) the proxy process used so far.
func (pp *proxyProcess) cpu() (time.Duration, error) {
	_, d, err := statCPU(fmt.Sprintf("/proc/%d/stat", pp.cmd.Process.Pid))
	return d, err
}

// Close ends the proxy process: its stdin closes, it closes its proxies
// (and every connection through them) and exits; after 10s it is killed.
func (pp *proxyProcess) Close() {
	_ = pp.stdin.Close()
	exited := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, pp.stdout)
		_ = pp.cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = pp.cmd.Process.Kill()
		<-exited
	}
}
