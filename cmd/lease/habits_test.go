package main

import (
	"database/sql"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// remainingAt runs a lease run with args whose command asks lease status
// for its own lease, and returns the time it had left then, in ms.
func remainingAt(t *testing.T, env []string, args ...string) int64 {
	t.Helper()
	env = append(env, "LEASE_BACKEND="+sqliteURL(t), "LB="+leaseBin)
	res := runLease(t, env, append(append([]string{"run"}, args...), "ttl", "--", "sh", "-c", `"$LB" status --json ttl`)...)
	var st leaseJSON
	if err := json.Unmarshal([]byte(res.stdout), &st); res.code != 0 || err != nil || !st.Held {
		t.Fatalf("lease run %s -- lease status --json: %v\n%s", strings.Join(args, " "), err, res)
	}
	return st.RemainingMS
}

// A duration without a unit is a number of seconds, as with etcdctl; every
// flag may come from $LEASE_<FLAG>, and the command line wins.
func TestDurationsAndTheEnvironment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env      []string
		args     []string
		min, max int64
	}{
		{nil, []string{"--ttl", "30"}, 20000, 30000},
		{nil, []string{"--ttl", "1.5m"}, 80000, 90000},
		{nil, []string{"-ttl", "40s"}, 30000, 40000}, // Go's single-dash form still works
		{[]string{"LEASE_TTL=45"}, nil, 35000, 45000},
		{[]string{"LEASE_TTL=45"}, []string{"--ttl", "20s"}, 10000, 20000},
		{[]string{"LEASE_TTL=45", "LEASE_RENEW_EVERY=5s", "LEASE_GRACE=1"}, nil, 35000, 45000},
	} {
		if got := remainingAt(t, tc.env, tc.args...); got < tc.min || got > tc.max {
			t.Errorf("env %v, lease run %s: the lease had %dms left, want between %d and %d",
				tc.env, strings.Join(tc.args, " "), got, tc.min, tc.max)
		}
	}
	// A bad value in the environment is an error that names the variable.
	for _, tc := range []struct {
		env  string
		args []string
	}{
		{"LEASE_TTL=30x", []string{"run", "x", "--", "true"}},
		{"LEASE_WAIT=soon", []string{"run", "x", "--", "true"}},
		{"LEASE_CONFLICT_EXIT_CODE=many", []string{"run", "x", "--", "true"}},
		{"LEASE_TIMEOUT=never", []string{"status", "x"}},
		{"LEASE_JSON=yes please", []string{"status", "x"}},
	} {
		res := runLease(t, []string{tc.env, "LEASE_BACKEND=" + sqliteURL(t)}, tc.args...)
		variable, _, _ := strings.Cut(tc.env, "=")
		if res.code != exitUsage || !oneLineWith(res.stderr, "$"+variable) {
			t.Errorf("%s lease %s: want exit 2 and one line naming $%s\n%s", tc.env, strings.Join(tc.args, " "), variable, res)
		}
	}
	// --owner never comes from the environment: lease run gives COMMAND
	// its owner as $LEASE_OWNER, and a lease run inside COMMAND must not
	// re-enter the outer tenure.
	res := runLease(t, []string{"LEASE_BACKEND=" + sqliteURL(t), "LB=" + leaseBin}, "run", "outer", "--", "sh", "-c",
		`"$LB" run outer -- echo inner ran`)
	if res.code != exitBusyDflt || strings.Contains(res.stdout, "inner ran") {
		t.Errorf("a lease run of the same name inside lease run: want the inner one to find it busy (exit %d)\n%s", exitBusyDflt, res)
	}
}

// Help is on stdout, shows --flags, and no "(default -1ns)" noise.
func TestHelp(t *testing.T) {
	t.Parallel()
	singleDash := regexp.MustCompile(`(?m)^\s+-[a-z]`)
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"},
		{"run", "--help"}, {"run", "-h"}, {"help", "run"},
		{"status", "--help"}, {"list", "--help"}, {"release", "--help"}, {"check", "--help"},
		{"schema", "--help"}, {"cleanup", "--help"},
	} {
		res := runLease(t, nil, args...)
		switch {
		case res.code != 0 || res.stderr != "" || !strings.HasPrefix(res.stdout, "usage: lease"):
			t.Errorf("lease %s: want exit 0 and the usage on stdout\n%s", strings.Join(args, " "), res)
		case singleDash.MatchString(res.stdout) || strings.Contains(res.stdout, "-1ns") || strings.Contains(res.stdout, "(default 0"):
			t.Errorf("lease %s: single-dash flags or default noise in the help\n%s", strings.Join(args, " "), res)
		case args[0] == "run" && !strings.Contains(res.stdout, "--ttl D"):
			t.Errorf("lease %s: no --ttl in the help\n%s", strings.Join(args, " "), res)
		}
	}
	if res := runLease(t, nil, "run", "--help"); !strings.Contains(res.stdout, "keeps running") || !strings.Contains(res.stdout, "$LEASE_") {
		t.Errorf("lease run --help should say that --min-hold keeps lease running, and how flags come from the environment\n%s", res)
	}
}

// A misspelt command or flag gets one line suggesting the right one.
func TestDidYouMean(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"stauts", "x"}, "did you mean status?"},
		{[]string{"lsit"}, "did you mean list?"},
		{[]string{"relase", "--force", "x"}, "did you mean release?"},
		{[]string{"run", "--ttll", "5s", "x", "--", "true"}, "did you mean --ttl?"},
		{[]string{"status", "--jsno", "x"}, "did you mean --json?"},
		{[]string{"--backedn", "mem://", "status", "x"}, "did you mean --backend?"},
	} {
		res := runLease(t, nil, tc.args...)
		if res.code != exitUsage || !oneLineWith(res.stderr, tc.want) {
			t.Errorf("lease %s: want exit 2 and one line with %q\n%s", strings.Join(tc.args, " "), tc.want, res)
		}
	}
}

// lease schema prints a SQL store's DDL without connecting to it.
func TestSchema(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, want string
	}{
		{"postgres://app@db.invalid:5432/app?table=jobs.leases&sslmode=require", "CREATE TABLE IF NOT EXISTS jobs.leases (\n\tlease_key   BYTEA"},
		{"mysql://app@db.invalid/app", "CREATE TABLE IF NOT EXISTS leases (\n\tlease_key   BINARY(32)"},
		{"sqlite:///nonexistent/dir/lease.db?table=locks", "CREATE TABLE IF NOT EXISTS locks (\n\tlease_key   BLOB"},
	} {
		res := runLease(t, nil, "schema", tc.url)
		if res.code != 0 || !strings.HasPrefix(res.stdout, tc.want) || !strings.HasSuffix(res.stdout, ";\n") {
			t.Errorf("lease schema %s: want exit 0 and a statement starting %q\n%s", tc.url, tc.want, res)
		}
	}
	res := runLease(t, []string{"LEASE_BACKEND=postgres://app@db.invalid/app"}, "schema")
	if res.code != 0 || !strings.Contains(res.stdout, "CREATE TABLE IF NOT EXISTS leases") {
		t.Errorf("lease schema with $LEASE_BACKEND: want the default table's DDL\n%s", res)
	}
	for _, u := range []string{"redis://127.0.0.1:1/0", "etcd://127.0.0.1:1", "postgres://app@h/app?table=bad;name"} {
		if res := runLease(t, nil, "schema", u); res.code != exitUsage || !oneLineWith(res.stderr) || res.stdout != "" {
			t.Errorf("lease schema %s: want exit 2 and one line\n%s", u, res)
		}
	}
}

// lease cleanup deletes a SQL store's rows of long-ended leases, and says
// there is nothing to do for other stores.
func TestCleanup(t *testing.T) {
	t.Parallel()
	store := sqliteURL(t)
	env := []string{"LEASE_BACKEND=" + store}
	for _, name := range []string{"old", "recent"} {
		if res := runLease(t, env, "run", name, "--", "true"); res.code != 0 {
			t.Fatalf("lease run %s: %s", name, res)
		}
	}
	// "old" was released long ago: the table stores minus the moment of
	// release, here 1ms after 1970.
	db, err := sql.Open("sqlite", strings.TrimPrefix(store, "sqlite://"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE leases SET expires_at = -1 WHERE name = ?`, []byte("old")); err != nil {
		t.Fatal(err)
	}
	res := runLease(t, env, "cleanup")
	if res.code != 0 || !strings.Contains(res.stdout, "deleted 1 row ") {
		t.Errorf("lease cleanup: want exit 0 and 1 row deleted\n%s", res)
	}
	var left int
	if err := db.QueryRow(`SELECT count(*) FROM leases`).Scan(&left); err != nil || left != 1 {
		t.Errorf("after cleanup %d rows are left (%v), want the recent one", left, err)
	}
	if res := runLease(t, env, "cleanup", "--older-than", "10s"); res.code != exitUsage || !oneLineWith(res.stderr, "1m") {
		t.Errorf("lease cleanup --older-than 10s: want exit 2 naming the minimum\n%s", res)
	}
	if res := runLease(t, nil, "cleanup", "redis://127.0.0.1:1/0"); res.code != 0 || !strings.Contains(res.stdout, "nothing to clean up") {
		t.Errorf("lease cleanup of a Redis store: want exit 0 saying there is nothing to clean up\n%s", res)
	}
}

// lease version prints the module version, "(devel)" without one.
func TestVersion(t *testing.T) {
	t.Parallel()
	res := runLease(t, nil, "version")
	if res.code != 0 || !regexp.MustCompile(`^lease (\(devel\)|v[0-9]\S*)\n$`).MatchString(res.stdout) {
		t.Errorf("lease version: want exit 0 and \"lease VERSION\"\n%s", res)
	}
}
