package driver

import (
	"testing"
	"time"

	"github.com/leasekit/lease"
)

// TestDoubtsStayBounded: the tenures in doubt are at most maxDoubts, the
// one that matters for the shortest time goes first, and a doubt is
// forgotten once its time is over.
func TestDoubtsStayBounded(t *testing.T) {
	var d doubts
	base := time.Now().Add(time.Hour)
	for i := range maxDoubts + 1 {
		d.add(lease.Lease{Name: "n", Owner: "o", Token: uint64(i + 1), Deadline: base.Add(time.Duration(i) * time.Second)})
	}
	if got := len(d.m); got != maxDoubts || d.n.Load() != int64(got) {
		t.Fatalf("%d tenures in doubt (count %d); want at most %d", got, d.n.Load(), maxDoubts)
	}
	if d.has(doubtKey{"n", "o", 1}) {
		t.Fatal("the doubt that mattered for the shortest time was kept past the bound")
	}
	if !d.has(doubtKey{"n", "o", maxDoubts + 1}) {
		t.Fatal("the latest doubt was dropped")
	}
	var e doubts
	e.add(lease.Lease{Name: "n", Owner: "o", Token: 1, Deadline: time.Now().Add(-doubtFor - time.Second)})
	if e.has(doubtKey{"n", "o", 1}) || e.n.Load() != 0 {
		t.Fatalf("a doubt whose time is over is still held (count %d)", e.n.Load())
	}
	e.add(lease.Lease{Name: "n", Owner: "o", Token: 2, Deadline: time.Now()})
	e.clear(doubtKey{"n", "o", 2})
	if e.has(doubtKey{"n", "o", 2}) || e.n.Load() != 0 {
		t.Fatalf("a cleared doubt is still held (count %d)", e.n.Load())
	}
}
