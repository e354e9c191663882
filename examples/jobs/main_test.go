package main

import (
	"context"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var out strings.Builder
	stats, err := run(context.Background(), &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	want := Stats{Completed: 7, Retried: 1, Lost: 1, Deferred: stats.Deferred}
	if stats != want {
		t.Errorf("stats %+v, want %+v\n%s", stats, want, out.String())
	}
	if !strings.Contains(out.String(), "job 7 (export) completed, but its lease was lost mid-run") {
		t.Errorf("the lost lease was not logged:\n%s", out.String())
	}
}
