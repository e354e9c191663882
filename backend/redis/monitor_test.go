package redislease_test

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// monitor records every command a real server executes, through the
// MONITOR command on a connection of its own. Unlike INFO commandstats,
// its lines say which client sent each command, so a measurement is exact
// even while other tests use the server.
type monitor struct {
	conn  net.Conn
	mu    sync.Mutex
	lines []string
	err   error
	done  chan struct{}
}

// startMonitor connects to the server of opts and starts MONITOR; it stops
// when t ends.
func startMonitor(t *testing.T, opts *redis.Options) *monitor {
	t.Helper()
	conn, err := net.DialTimeout("tcp", opts.Addr, 5*time.Second)
	if err != nil {
		t.Fatalf("MONITOR connection: %v", err)
	}
	m := &monitor{conn: conn, done: make(chan struct{})}
	t.Cleanup(func() {
		_ = conn.Close()
		<-m.done
	})
	r := bufio.NewReader(conn)
	send := func(args ...string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := conn.Write([]byte(b.String())); err != nil {
			t.Fatalf("MONITOR connection: %v", err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("MONITOR connection: %v", err)
		}
		return strings.TrimRight(line, "\r\n")
	}
	if opts.Password != "" {
		args := []string{"AUTH", opts.Password}
		if opts.Username != "" {
			args = []string{"AUTH", opts.Username, opts.Password}
		}
		if got := send(args...); got != "+OK" {
			t.Fatalf("AUTH on the MONITOR connection: %s", got)
		}
	}
	if got := send("MONITOR"); got != "+OK" {
		t.Fatalf("MONITOR: %s", got)
	}
	go func() {
		defer close(m.done)
		for {
			line, err := r.ReadString('\n')
			m.mu.Lock()
			if err != nil {
				m.err = err
				m.mu.Unlock()
				return
			}
			m.lines = append(m.lines, strings.TrimPrefix(strings.TrimRight(line, "\r\n"), "+"))
			m.mu.Unlock()
		}
	}()
	return m
}

// monitorLine parses a MONITOR line: `<time> [<db> <client>] "<command>" ...`,
// where client is "lua" for a command run by a script.
var monitorLine = regexp.MustCompile(`^[0-9.]+ \[[0-9]+ ([^\]]+)\] "([^"]*)"`)

// measure runs op between two ECHO markers sent by c, and returns the
// commands the server executed for c in between: the commands c sent, and
// those that scripts c sent ran (MONITOR lists a script's commands, as
// client "lua", right after the EVAL or EVALSHA that ran them).
func (m *monitor) measure(t *testing.T, c *redis.Client, op func() error) ([]string, error) {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	mark := "leasetest-mark-" + hex.EncodeToString(b[:])
	start, end := `"echo" "`+mark+`-start"`, `"echo" "`+mark+`-end"`
	if err := c.Echo(t.Context(), mark+"-start").Err(); err != nil {
		t.Fatal(err)
	}
	opErr := op()
	if err := c.Echo(t.Context(), mark+"-end").Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		m.mu.Lock()
		done, err := containsSuffix(m.lines, end), m.err
		m.mu.Unlock()
		if done {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("MONITOR did not show the end marker (error %v)", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	m.mu.Lock()
	lines := m.lines
	m.lines = nil
	m.mu.Unlock()

	var (
		me, owner string
		cmds      []string
		started   bool
	)
	for _, line := range lines {
		f := monitorLine.FindStringSubmatch(line)
		if f == nil {
			continue
		}
		switch {
		case strings.HasSuffix(line, start):
			me, started = f[1], true
			continue
		case strings.HasSuffix(line, end) && f[1] == me:
			return cmds, opErr
		}
		if f[1] != "lua" {
			owner = f[1]
		}
		if started && owner == me {
			cmds = append(cmds, strings.ToLower(f[2]))
		}
	}
	t.Fatal("MONITOR lines lack the markers")
	return nil, nil
}

func containsSuffix(lines []string, suffix string) bool {
	for _, l := range lines {
		if strings.HasSuffix(l, suffix) {
			return true
		}
	}
	return false
}
