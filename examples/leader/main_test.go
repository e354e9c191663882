package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasekit/lease/backend/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), &out, memory.New(), 300*time.Millisecond); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"node-a leads term 1",
		"node-a resigns: its work stopped, then the office was released",
		"node-b leads term 2",
		"node-b steps down: its Deadline passed",
		"node-c leads term 3",
		"a late write by node-b under term 2: fence: write for \"leader\" with token 2 refused",
		"node-a at 10.0.0.1:8080 (term 1)",
		"node-c at 10.0.0.3:8080 (term 3)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
