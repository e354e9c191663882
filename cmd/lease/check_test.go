package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/conformance"
	"github.com/leasekit/lease/internal/testenv"
)

func TestCheckPassesOnMemory(t *testing.T) {
	t.Parallel()
	res := runLease(t, nil, "check", "mem://")
	if res.code != exitOK || !strings.Contains(res.stdout, "PASS: the store kept all") || strings.Contains(res.stdout, "FAIL") || strings.Contains(res.stdout, "ERROR") {
		t.Fatalf("lease check mem://: want exit 0 and PASS\n%s", res)
	}
	// A line per case of the suite.
	for _, c := range conformance.Cases() {
		if !strings.Contains(res.stdout, c.Name) {
			t.Errorf("no line for case %q\n%s", c.Name, res)
		}
	}
	if !strings.Contains(res.stdout, "not reached over TCP") {
		t.Errorf("want the fault cases skipped with a reason for a store not reached over TCP\n%s", res)
	}
	if !strings.Contains(res.stdout, "cleanup: ended") {
		t.Errorf("want a line saying the leases the suite left were ended\n%s", res)
	}
}

func TestCheckPassesOnSQLite(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	// A 2s ttl, not the default 1s: CI runs this beside every other
	// package's tests, under -race, on two cores, where one SQLite write
	// can take hundreds of milliseconds; the suite would take a slow store
	// for a broken one.
	//
	// --parallel 4, not SQLite's default of one case at a time: the
	// suite's cases mostly wait out ttls, so one at a time takes 45-75s
	// and bounds the whole package's run. Four at once puts more writers
	// on SQLite's one write lock than the default, so the store is
	// checked under more contention, not less (it passed three runs in a
	// row beside two busy loops, in about 23s each).
	res := runLease(t, nil, "check", "--ttl", "2s", "--parallel", "4", sqliteURL(t))
	if res.code != exitOK || !strings.Contains(res.stdout, "PASS") || strings.Contains(res.stdout, "FAIL") {
		t.Fatalf("lease check on SQLite: want exit 0 and PASS\n%s", res)
	}
}

func TestCheckFailsOnABrokenStore(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	res := start(t, brokenBin, nil, "check", "broken://").wait(t)
	if res.code != exitFailure || !strings.Contains(res.stdout, "FAIL") || !strings.Contains(res.stdout, "two owners") {
		t.Fatalf("lease check on a store that gives one lease to two owners: want exit 1 and FAIL\n%s", res)
	}
	const broken = "FAIL   another owner gets ErrHeld with the holder and remaining time"
	if !strings.Contains(res.stdout, broken) {
		t.Errorf("want the case the store breaks named: %q\n%s", broken, res)
	}
	if !strings.Contains(res.stderr, "does not keep the lease contract") {
		t.Errorf("want a one-line verdict on stderr\n%s", res)
	}
}

// TestCheckCannotTestAFailingStore: a store that opens but fails every
// call breaks no promise: exit 4, ERROR lines, no FAIL.
func TestCheckCannotTestAFailingStore(t *testing.T) {
	t.Parallel()
	res := start(t, brokenBin, nil, "check", "broken://?down=1").wait(t)
	if res.code != exitUntested || !strings.Contains(res.stdout, "ERROR  ") || strings.Contains(res.stdout, "FAIL") {
		t.Fatalf("lease check on a store that fails every call: want exit 4, ERROR and no FAIL\n%s", res)
	}
	if !strings.Contains(res.stderr, "could not test") || !strings.Contains(res.stderr, "connection refused") {
		t.Errorf("want a one-line reason on stderr\n%s", res)
	}
}

// closedPort is a TCP address nobody listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestCheckUnreachableStore: a store that cannot be reached exits 4, and
// neither stdout nor stderr shows the URL's password.
func TestCheckUnreachableStore(t *testing.T) {
	t.Parallel()
	addr := closedPort(t)
	for _, u := range []string{
		"redis://:Hunter2@" + addr + "/0",
		"postgres://app:Hunter2@" + addr + "/db?sslmode=disable",
		"mysql://root:Hunter2@" + addr + "/test",
	} {
		t.Run(strings.Split(u, ":")[0], func(t *testing.T) {
			t.Parallel()
			res := runLease(t, nil, "--timeout", "5s", "check", u)
			if res.code != exitUntested || !strings.Contains(res.stderr, "could not test") {
				t.Errorf("lease check on an unreachable store: want exit 4\n%s", res)
			}
			if strings.Contains(res.stdout+res.stderr, "Hunter2") {
				t.Errorf("the password is in the output\n%s", res)
			}
		})
	}
}

// checkReport is the part of lease check --json the tests read.
type checkReport struct {
	Store   string `json:"store"`
	Prefix  string `json:"prefix"`
	Verdict string `json:"verdict"`
	Passed  int    `json:"passed"`
	Failed  int    `json:"failed"`
	Cleanup struct {
		Released int `json:"released"`
	} `json:"cleanup"`
	Results []struct {
		Case     string  `json:"case"`
		Contract string  `json:"contract"`
		Outcome  string  `json:"outcome"`
		Reason   string  `json:"reason"`
		Duration string  `json:"duration"`
		Seconds  float64 `json:"seconds"`
	} `json:"results"`
}

func TestCheckJSON(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	res := start(t, brokenBin, nil, "check", "--json", "broken://").wait(t)
	if res.code != exitFailure {
		t.Fatalf("lease check --json on a broken store: want exit 1\n%s", res)
	}
	var rep checkReport
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, res)
	}
	cases := conformance.Cases()
	if rep.Verdict != "fail" || rep.Failed == 0 || rep.Passed == 0 || len(rep.Results) != len(cases) {
		t.Fatalf("verdict %q, %d failed, %d passed, %d results for %d cases\n%s", rep.Verdict, rep.Failed, rep.Passed, len(rep.Results), len(cases), res)
	}
	for i, r := range rep.Results {
		if r.Case != cases[i].Name || r.Contract != cases[i].Contract || r.Duration == "" {
			t.Errorf("result %d: %+v, want case %q contract %q and a duration", i, r, cases[i].Name, cases[i].Contract)
		}
		switch r.Outcome {
		case "pass":
			if r.Reason != "" {
				t.Errorf("%s: passed with a reason %q", r.Case, r.Reason)
			}
		case "fail", "skip", "error":
			if r.Reason == "" {
				t.Errorf("%s: %s without a reason", r.Case, r.Outcome)
			}
		default:
			t.Errorf("%s: outcome %q", r.Case, r.Outcome)
		}
		if r.Case == "another owner gets ErrHeld with the holder and remaining time" && r.Outcome != "fail" {
			t.Errorf("%s: %s, want fail", r.Case, r.Outcome)
		}
	}
}

func TestCheckUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"check", "mem://", "mem://"},
		{"check", "--parallel", "-1", "mem://"},
		{"check", "--ttl", "-1s", "mem://"},
		{"check", "--no-such-flag", "mem://"},
		{"check", "not a url"},
		{"check", "nosuchscheme://x"},
		{"check", "mem://?x=1"},
	} {
		res := runLease(t, nil, args...)
		if res.code != exitUsage || res.stdout != "" && !strings.Contains(res.stdout, "usage") {
			t.Errorf("lease %s: want exit 2 and nothing on stdout\n%s", strings.Join(args, " "), res)
		}
	}
}

// TestCheckRunsFaultCasesOverTCP runs lease check on the Redis server of
// LEASE_TEST_REDIS: the fault cases run through the suite's proxy, and
// --no-faults leaves them out with a reason.
func TestCheckRunsFaultCasesOverTCP(t *testing.T) {
	t.Parallel()
	u := testenv.Lookup(t, "LEASE_TEST_REDIS")
	// The two runs use random prefixes of their own: they run at once.
	for _, noFaults := range []bool{false, true} {
		name := "faults"
		if noFaults {
			name = "no-faults"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkFaultCasesOverTCP(t, u, noFaults)
		})
	}
}

// checkFaultCasesOverTCP is one lease check run of
// TestCheckRunsFaultCasesOverTCP, with or without --no-faults.
func checkFaultCasesOverTCP(t *testing.T, u string, noFaults bool) {
	args := []string{"check", "--json", "--tenures", "200", u}
	if noFaults {
		args = append(args, "--no-faults")
	}
	res := runLease(t, nil, args...)
	var rep checkReport
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil || res.code != exitOK {
		t.Fatalf("lease %s: want exit 0 and JSON: %v\n%s", strings.Join(args, " "), err, res)
	}
	for _, r := range rep.Results {
		if !strings.Contains(r.Contract, "faults") {
			continue
		}
		switch {
		case !noFaults && r.Outcome != "pass":
			t.Errorf("%s: %s %s, want pass", r.Case, r.Outcome, r.Reason)
		case noFaults && (r.Outcome != "skip" || !strings.Contains(r.Reason, "--no-faults")):
			t.Errorf("with --no-faults, %s: %s %s, want skip naming --no-faults", r.Case, r.Outcome, r.Reason)
		}
	}
	// Nothing the suite took stays held.
	l, err := lease.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	left, err := l.(lease.Lister).List(t.Context(), rep.Prefix)
	l.Close()
	if err != nil || len(left) != 0 || rep.Prefix == "" {
		t.Errorf("lease %s: after it, %d leases (%v) are held under its prefix %q (ended %d)", strings.Join(args, " "), len(left), err, rep.Prefix, rep.Cleanup.Released)
	}
}

// TestCheckReportsUntested: a case whose own timing could not be kept is
// printed as UNTESTED with its reason, and the verdict is "could not
// test", never a failure of the store.
func TestCheckReportsUntested(t *testing.T) {
	var out bytes.Buffer
	c := &checker{g: &globals{stdout: &out, stderr: io.Discard}, o: checkOptions{raw: "mem://", ttl: time.Second}, secret: strings.NewReplacer()}
	results := []conformance.Result{
		{Case: "a", Outcome: conformance.Passed},
		{Case: "b", Outcome: conformance.Untested, Reason: "renew_release.go:1 (x): Renew was answered 3ms after the lease's Deadline"},
	}
	err := c.report(results, time.Second, "", cleanupReport{}, nil)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitUntested || !strings.Contains(ee.msg, "could not keep their timing") {
		t.Fatalf("report = %v; want exit %d saying the timing could not be kept", err, exitUntested)
	}
	if !strings.Contains(out.String(), "UNTESTED  b") || !strings.Contains(out.String(), "answered 3ms after the lease's Deadline") {
		t.Fatalf("report printed:\n%s\nwant the case marked UNTESTED with its reason", out.String())
	}
}

// TestServerClockSchemes: lease check vouches for expiry by the store's
// clock (the clock-skew case runs) only for the built-in backends that
// read no client clock; SQLite and any other scheme stay "single clock
// only".
func TestServerClockSchemes(t *testing.T) {
	for scheme, want := range map[string]bool{
		"postgres": true, "postgresql": true, "mysql": true, "redis": true, "rediss+sentinel": true,
		"redis+cluster": true, "etcd": true, "etcds": true, "mem": true,
		"sqlite": false, "broken": false, "myown": false,
	} {
		if got := serverClock(scheme); got != want {
			t.Errorf("serverClock(%q) = %v, want %v", scheme, got, want)
		}
	}
}
