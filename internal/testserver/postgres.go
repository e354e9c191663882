package testserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasekit/lease/internal/testenv"
)

// PostgresOptions configures StartPostgres. A nil *PostgresOptions means
// the defaults.
type PostgresOptions struct {
	// Settings are extra server settings, each "name=value" (as
	// postgres -c takes them), such as "synchronous_commit=off" or
	// "max_connections=20". They override the helper's.
	Settings []string
}

// StartPostgres creates a private PostgreSQL cluster (initdb, trust
// authentication, superuser postgres) in a new temporary directory, runs
// its server on a free loopback port, waits until it accepts connections,
// and stops it when the test ends. Its URL is
// "postgres://postgres@127.0.0.1:port/postgres?sslmode=disable".
//
// Stop is a fast shutdown (SIGINT, what pg_ctl stop -m fast sends), so
// Restart is pg_ctl restart -m fast; Kill is a crash of every PostgreSQL
// process, and the next Start recovers from the WAL. The server runs with
// fsync=off: a killed server loses nothing it committed (the WAL is
// written at commit), only a crash of the machine would.
//
// PostgreSQL refuses to run as root, so as root the helper runs initdb
// and the server as the user postgres (setpriv), in a directory under the
// system's temporary directory that it owns. It skips the test (fails it
// under LEASE_TEST_REQUIRE_ALL=1) when the server programs are missing
// (Debian package postgresql) or, as root, when there is no user
// postgres.
func StartPostgres(t testing.TB, opts *PostgresOptions) *Process {
	t.Helper()
	testenv.Slow(t) // starts server processes
	if opts == nil {
		opts = &PostgresOptions{}
	}
	needUnix(t)
	bin := postgresBinDir(t)
	wrap, owner := postgresUser(t)

	// Not under t.TempDir: its parents are private to root, and the
	// socket path must stay short.
	dir, err := os.MkdirTemp("", "lease-pg-")
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if owner != nil {
		if err := os.Chown(dir, owner.uid, owner.gid); err != nil {
			t.Fatalf("testserver: give %s to postgres: %v", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	ports, err := freePorts(1)
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	addr := loopback(ports[0])
	argv := append(append([]string(nil), wrap...), filepath.Join(bin, "postgres"),
		"-D", data,
		"-p", strconv.Itoa(ports[0]),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+dir,
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
		"-c", "dynamic_shared_memory_type=mmap",
		"-c", "shared_buffers=16MB",
		"-c", "max_connections=100",
		"-c", "logging_collector=off",
		"-c", "log_min_messages=warning",
	)
	for _, s := range opts.Settings {
		argv = append(argv, "-c", s)
	}
	p, err := newProcess(t, "postgres", addr, dir, argv...)
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	p.env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	p.stopSignal = sigInt // fast shutdown
	p.endSignal = sigQuit // immediate shutdown: quick, and frees shared memory
	p.url = fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", addr)
	p.ready = func(ctx context.Context) error {
		c, err := pgconn.Connect(ctx, p.url+"&connect_timeout=2")
		if err != nil {
			return err
		}
		return c.Close(ctx)
	}

	initdb := append(append([]string(nil), wrap...), filepath.Join(bin, "initdb"),
		"-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	ctx, cancel := context.WithTimeout(context.Background(), 2*ReadyTimeout)
	defer cancel()
	if err := p.runOnce(ctx, initdb); err != nil {
		t.Fatalf("testserver: initdb: %v%s", err, p.logSuffix())
	}
	p.launch()
	return p
}

// postgresBinDir returns the directory of the newest installed
// PostgreSQL server programs, or skips t.
func postgresBinDir(t testing.TB) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { // newest major version first
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	if path, err := exec.LookPath("postgres"); err == nil {
		dirs = append(dirs, filepath.Dir(path))
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "postgres")) && isExecutable(filepath.Join(d, "initdb")) {
			return d
		}
	}
	testenv.Unavailable(t, "the PostgreSQL server programs (postgres, initdb) are not installed: install the Debian package postgresql (apt-get install -y postgresql) to run this test")
	return ""
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// owner is the user that owns and runs a server.
type owner struct{ uid, gid int }

// postgresUser returns the command prefix that runs a program as the user
// postgres (with the parent-death signal set again after the switch,
// which clears it) and that user, when the test runs as root; nothing
// otherwise.
func postgresUser(t testing.TB) ([]string, *owner) {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		testenv.Unavailable(t, "running as root, and PostgreSQL refuses to run as root: this test needs the user postgres (created by the Debian package postgresql): %v", err)
		return nil, nil
	}
	setpriv := testenv.RequireBinary(t, "setpriv", "util-linux")
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return []string{setpriv, "--reuid=" + u.Uid, "--regid=" + u.Gid, "--clear-groups", "--pdeathsig=KILL", "--"}, &owner{uid, gid}
}

// runOnce runs a setup program (initdb, mariadb-install-db) to the end
// within ctx, with its output in the server's log.
func (p *Process) runOnce(ctx context.Context, argv []string) error {
	fmt.Fprintf(p.log, "\n==== testserver: running %s\n", strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = p.dir
	cmd.Env = p.env
	cmd.Stdout = p.log
	cmd.Stderr = p.log
	cmd.SysProcAttr = sysProcAttr()
	if err := spawn(cmd); err != nil {
		return err
	}
	// As in Process.reap, the group is signalled only while its leader is
	// unreaped, so its id cannot have been reused.
	var mu sync.Mutex
	exited := false
	done := make(chan error, 1)
	go func() {
		supported := waitNoReap(cmd.Process.Pid)
		mu.Lock()
		exited = supported
		mu.Unlock()
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		released()
		return err
	case <-ctx.Done():
		mu.Lock()
		if !exited {
			_ = sendSignal(cmd.Process.Pid, true, sigKill)
		}
		mu.Unlock()
		<-done
		released()
		return fmt.Errorf("%s did not finish: %w", filepath.Base(argv[0]), ctx.Err())
	}
}
