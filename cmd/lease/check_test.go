package main

import (
	"strings"
	"testing"
)

func TestCheckPassesOnSQLite(t *testing.T) {
	// A 2s ttl, not the default 1s: CI runs this beside every other
	// package's tests, under -race, on two cores, where one SQLite write
	// can take hundreds of milliseconds; the suite would take a slow store
	// for a broken one.
	res := runLease(t, nil, "check", "--ttl", "2s", sqliteURL(t))
	if res.code != 0 || !strings.Contains(res.stdout, "PASS") || strings.Contains(res.stdout, "FAIL") {
		t.Fatalf("lease check on SQLite: want exit 0 and PASS\n%s", res)
	}
}

func TestCheckFailsOnABrokenStore(t *testing.T) {
	res := start(t, brokenBin, nil, "check", "broken://").wait(t)
	if res.code != exitFailure || !strings.Contains(res.stdout, "FAIL") || !strings.Contains(res.stdout, "two owners") {
		t.Fatalf("lease check on a store that gives one lease to two owners: want exit 1 and FAIL\n%s", res)
	}
	if !strings.Contains(res.stderr, "does not keep the lease contract") {
		t.Errorf("want a one-line verdict on stderr\n%s", res)
	}
}
