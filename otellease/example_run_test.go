package otellease_test

import (
	"io"
	"os"
	"strings"
	"testing"
)

// ExampleWrap has no Output line, since span IDs and times change; this
// runs it and checks what it prints.
func TestExampleWrapPrintsSpans(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	printed := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		printed <- string(b)
	}()
	func() {
		defer func() { os.Stdout = stdout }()
		ExampleWrap()
	}()
	w.Close()
	out := <-printed
	r.Close()
	for _, want := range []string{
		`"Name": "lease.acquire"`, `"Name": "lease.release"`,
		`"Key": "lease.name"`, `"Value": "nightly-report"`,
		`"Key": "lease.outcome"`, `"Value": "acquired"`, `"Value": "released"`,
		`"Key": "lease.token"`, `"Key": "lease.backend"`, `"Value": "memory"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ExampleWrap printed no %s:\n%s", want, out)
		}
	}
}
