package main

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease/internal/testenv"
)

// silentServer accepts TCP connections and never answers on them (nor
// closes them until the test ends): a store that is up but stuck. With
// hangUp it closes each connection as soon as it is accepted instead.
func silentServer(t *testing.T, hangUp bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if hangUp {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// silentURLs are URLs of each TCP backend, with a password, at addr.
func silentURLs(addr string) map[string]string {
	return map[string]string{
		"redis":    fmt.Sprintf("redis://:s3cretpw@%s/0", addr),
		"postgres": fmt.Sprintf("postgres://app:s3cretpw@%s/app?sslmode=disable", addr),
		"mysql":    fmt.Sprintf("mysql://app:s3cretpw@%s/app", addr),
	}
}

// A store that accepts connections but never answers: every command gives
// up after its limit (--timeout, or the ttl for run) with one line that
// names the store without its password, and exits 1 (check: 4, it could
// not test the store). Nothing from a
// driver reaches stderr.
func TestSilentStoreTimesOutWithOneLine(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	addr := silentServer(t, false)
	for scheme, u := range silentURLs(addr) {
		redacted := strings.Replace(u, "s3cretpw", "xxxxx", 1)
		for _, tc := range []struct {
			args  []string
			env   []string
			limit time.Duration
			code  int // exitFailure when zero
		}{
			{args: []string{"--backend", u, "--timeout", "1s", "status", "name"}, limit: time.Second},
			{args: []string{"--backend", u, "list", "--timeout", "1s"}, limit: time.Second},
			{args: []string{"--backend", u, "--timeout", "1s", "release", "--force", "name"}, limit: time.Second},
			{args: []string{"--backend", u, "run", "--ttl", "2s", "name", "--", "true"}, limit: 2 * time.Second},
			{args: []string{"--backend", u, "--timeout", "1s", "run", "--ttl", "1m", "name", "--", "true"}, limit: time.Second},
			{args: []string{"--timeout", "1s", "check", u}, limit: time.Second, code: exitUntested},
			{args: []string{"--backend", u, "status", "name"}, env: []string{"LEASE_TIMEOUT=1s"}, limit: time.Second},
		} {
			t.Run(scheme, func(t *testing.T) {
				t.Parallel()
				begin := time.Now()
				res := runLease(t, tc.env, tc.args...)
				took := time.Since(begin)
				code := tc.code
				if code == 0 {
					code = exitFailure
				}
				if res.code != code || !oneLineWith(res.stderr, "did not answer in time", redacted) {
					t.Errorf("lease %s on a store that never answers: want exit %d and one line naming %s and saying it did not answer in time\n%s",
						strings.Join(tc.args, " "), code, redacted, res)
				}
				if strings.Contains(res.stderr+res.stdout, "s3cretpw") {
					t.Errorf("the password reached the output\n%s", res)
				}
				// Generous: the process starts, and the machine is loaded.
				if took > tc.limit+10*time.Second {
					t.Errorf("lease %s took %s to give up, want about %s", strings.Join(tc.args, " "), took.Round(time.Millisecond), tc.limit)
				}
			})
		}
	}
}

// A store that hangs up on every connection fails at once with one line:
// the MySQL driver's own "[mysql] packets.go" log line must not reach
// stderr.
func TestHangingUpStoreIsOneLine(t *testing.T) {
	t.Parallel()
	addr := silentServer(t, true)
	for scheme, u := range silentURLs(addr) {
		t.Run(scheme, func(t *testing.T) {
			res := runLease(t, nil, "--backend", u, "--timeout", "5s", "status", "name")
			if res.code != exitFailure || !oneLineWith(res.stderr) {
				t.Errorf("lease status on a store that hangs up: want exit 1 and one line\n%s", res)
			}
		})
	}
}
