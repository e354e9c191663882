package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), &out, 300*time.Millisecond); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"node-a leads with token 1", "node-a steps down", "node-b leads with token 2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
