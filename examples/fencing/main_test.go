package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/leasekit/lease/fence"
	"github.com/leasekit/lease/fence/sqlfence"
	"github.com/leasekit/lease/internal/testenv"
)

// want are the lines that say the story went as it should; run itself
// fails when the stale write is accepted or the data is not worker-b's.
var want = []string{
	"sql: worker-a renews its lease, checks that it is valid, then pauses before its next write",
	"sql: worker-b takes the lease once worker-a's has expired, with a larger token",
	"sql: worker-a wakes up and writes: refused (fence.ErrStale), worker-b's token beat its own",
	`sql: the data reads "final by worker-b, revised"`,
	"http: worker-a wakes up and writes: refused (fence.ErrStale), worker-b's token beat its own",
	`http: the data reads "final by worker-b, revised"`,
}

func check(t *testing.T, postgresURL string) {
	checkWith(t, postgresURL, "")
}

func checkWith(t *testing.T, postgresURL, leaseURL string) {
	var out strings.Builder
	if err := run(context.Background(), postgresURL, leaseURL, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
}

// TestRunWithAnotherLeaseStore runs the example with its leases in the
// memory store (--backend mem://) and its fences and data in SQLite.
func TestRunWithAnotherLeaseStore(t *testing.T) {
	testenv.Slow(t)
	checkWith(t, "", "mem://")
}

// TestRun runs the example on a SQLite file.
func TestRun(t *testing.T) { testenv.Slow(t); check(t, "") }

// TestRunPostgres runs it on LEASE_TEST_POSTGRES, as FENCING_POSTGRES
// would.
func TestRunPostgres(t *testing.T) { check(t, testenv.Lookup(t, "LEASE_TEST_POSTGRES")) }

// TestGuardedWriteSQL runs guarded-write.sql with psql on
// LEASE_TEST_POSTGRES, as lease run would (LEASE_NAME and LEASE_TOKEN in
// the environment), in a schema of its own: a stale token must make psql
// fail and leave the data alone, and the script's fence must be the one
// sqlfence keeps.
func TestGuardedWriteSQL(t *testing.T) {
	raw := testenv.Lookup(t, "LEASE_TEST_POSTGRES")
	psql, err := exec.LookPath("psql")
	if err != nil {
		if os.Getenv(testenv.RequireAll) == "1" {
			t.Fatalf("psql is not installed and %s=1", testenv.RequireAll)
		}
		t.Skip("psql is not installed")
	}
	ctx := context.Background()
	db, err := sql.Open("pgx", raw)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "fencing_psql_" + hex.EncodeToString(b[:])
	mustExec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	mustExec("CREATE SCHEMA " + schema)
	defer db.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE")
	mustExec("CREATE TABLE " + schema + ".reports (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
	f, err := sqlfence.New(ctx, db, sqlfence.WithTable(schema+".lease_fences"))
	if err != nil {
		t.Fatal(err)
	}

	runScript := func(name string, token uint64) (string, error) {
		cmd := exec.Command(psql, "-X", "-1", "-v", "ON_ERROR_STOP=1", "-f", "guarded-write.sql", raw)
		cmd.Env = append(os.Environ(), "LEASE_NAME="+name, "LEASE_TOKEN="+strconv.FormatUint(token, 10),
			"PGOPTIONS=-c search_path="+schema)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	body := func() string {
		var s string
		_ = db.QueryRowContext(ctx, "SELECT body FROM "+schema+".reports WHERE id = 1").Scan(&s)
		return s
	}
	if out, err := runScript("report q1", 10); err != nil {
		t.Fatalf("psql with token 10: %v\n%s", err, out)
	}
	if got := body(); got != "written under token 10" {
		t.Fatalf("after token 10 the report reads %q", got)
	}
	out, err := runScript("report q1", 7)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 || !strings.Contains(out, "stale lease token 7 for report q1: token 10 was accepted") {
		t.Fatalf("psql with the stale token 7: %v; want exit 3 naming token 10\n%s", err, out)
	}
	if got := body(); got != "written under token 10" {
		t.Fatalf("a stale script changed the report to %q", got)
	}
	// The script and sqlfence keep one fence.
	if err := f.Check(ctx, "report q1", 9); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("sqlfence after the script's token 10: Check(9) = %v", err)
	}
	if err := f.Check(ctx, "report q1", 12); err != nil {
		t.Fatal(err)
	}
	if out, err := runScript("report q1", 11); err == nil {
		t.Fatalf("psql with token 11 after sqlfence accepted 12 succeeded:\n%s", out)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
