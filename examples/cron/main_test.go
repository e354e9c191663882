package main

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	db := url.URL{Scheme: "sqlite", Path: filepath.ToSlash(filepath.Join(t.TempDir(), "lease.db"))}
	var out strings.Builder
	if err := run(context.Background(), db.String(), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if got := strings.Count(out.String(), " skips it: held by instance-"); got != 2 {
		t.Errorf("want two instances to skip the report, %d did:\n%s", got, out.String())
	}
}
