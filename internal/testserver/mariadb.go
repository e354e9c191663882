package testserver

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/leasekit/lease/internal/testenv"
)

// StartMariaDB creates a private MariaDB data directory
// (mariadb-install-db, user root with no password, database test), runs
// mariadbd on a free loopback port and a socket in that directory, waits
// until it answers, and stops it when the test ends. Its URL is
// "mysql://root@127.0.0.1:port/test". Stop is a clean shutdown (SIGTERM),
// Kill a crash, after which Start recovers. InnoDB flushes its log to the
// operating system at each commit but skips fsync, so a killed server
// keeps what it committed; only a crash of the machine would not.
//
// It skips the test (fails it under LEASE_TEST_REQUIRE_ALL=1) when the
// programs are missing (Debian package mariadb-server).
func StartMariaDB(t testing.TB) *Process {
	t.Helper()
	testenv.Slow(t) // starts server processes
	needUnix(t)
	install := findProgram(t, "mariadb-install-db", "mariadb-server", "mysql_install_db")
	server := findProgram(t, "mariadbd", "mariadb-server", "mysqld")
	dir, err := mkdir(t, "mariadb")
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	data := filepath.Join(dir, "data")
	ports, err := freePorts(1)
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	addr := loopback(ports[0])
	// Shared by the install and the server, so both make the same files.
	tmp := filepath.Join(dir, "tmp") // private: temporary tables of others must not meet ours
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatalf("testserver: %v", err)
	}
	common := []string{
		"--no-defaults",
		"--datadir=" + data,
		"--tmpdir=" + tmp,
		"--skip-name-resolve",
		"--innodb-log-file-size=16M",
		"--innodb-buffer-pool-size=32M",
		"--innodb-flush-method=nosync",
		"--innodb-flush-log-at-trx-commit=2",
		"--innodb-doublewrite=0",
	}
	if os.Geteuid() == 0 {
		common = append(common, "--user=root") // mariadbd refuses root unless told
	}
	argv := append(append([]string{server}, common...),
		"--port="+strconv.Itoa(ports[0]),
		"--bind-address=127.0.0.1",
		"--socket="+filepath.Join(dir, "mysqld.sock"),
		"--pid-file="+filepath.Join(dir, "mysqld.pid"),
	)
	p, err := newProcess(t, "mariadb", addr, dir, argv...)
	if err != nil {
		t.Fatalf("testserver: %v", err)
	}
	p.url = fmt.Sprintf("mysql://root@%s/test", addr)
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", addr
	p.ready = func(ctx context.Context) error {
		connector, err := mysql.NewConnector(cfg)
		if err != nil {
			return err
		}
		db := sql.OpenDB(connector)
		defer func() { _ = db.Close() }()
		_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS test")
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*ReadyTimeout)
	defer cancel()
	installArgv := append(append([]string{install}, common...), "--auth-root-authentication-method=normal", "--skip-test-db")
	if err := p.runOnce(ctx, installArgv); err != nil {
		t.Fatalf("testserver: mariadb-install-db: %v%s", err, p.logSuffix())
	}
	p.launch()
	return p
}

// findProgram returns the path of the first of name and its alternatives
// found in PATH or in /usr/sbin, or skips t naming the Debian package.
func findProgram(t testing.TB, name, debianPackage string, alternatives ...string) string {
	t.Helper()
	for _, n := range append([]string{name}, alternatives...) {
		if path, err := exec.LookPath(n); err == nil {
			return path
		}
		if path := filepath.Join("/usr/sbin", n); isExecutable(path) {
			return path
		}
	}
	return testenv.RequireBinary(t, name, debianPackage)
}
