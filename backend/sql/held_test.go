package sqllease

import (
	"fmt"
	"testing"
	"time"
)

// TestHeldNames checks the memory behind MySQL's read-first Acquires: a
// name counts as held from another owner only for owners other than the
// holder and only until the holder's time is up; forget drops it; and the
// memory never grows past maxHeldNames, dropping the names whose time is
// up first.
func TestHeldNames(t *testing.T) {
	t.Parallel()
	var h heldNames
	if h.heldFrom("a", "x") {
		t.Fatal("an empty memory reports a name held")
	}
	h.note("a", "holder", time.Minute)
	if !h.heldFrom("a", "x") {
		t.Error("a name noted held by another owner is not reported held for x")
	}
	if h.heldFrom("a", "holder") {
		t.Error("a name is reported held from its own holder")
	}
	h.forget("a")
	if h.heldFrom("a", "x") {
		t.Error("a forgotten name is still reported held")
	}
	h.note("gone", "holder", 0)
	if h.heldFrom("gone", "x") {
		t.Error("a name noted with no time left is reported held")
	}
	h.note("short", "holder", 20*time.Millisecond)
	time.Sleep(40 * time.Millisecond)
	if h.heldFrom("short", "x") {
		t.Error("a name is reported held after its holder's time was up")
	}
	if _, ok := h.m["short"]; ok {
		t.Error("a name whose time was up stays in the memory after it was asked about")
	}

	// Full of names whose time is up: a new name replaces them.
	for i := range maxHeldNames {
		h.m[fmt.Sprint("old", i)] = heldBy{owner: "holder", until: time.Now().Add(-time.Second)}
	}
	h.note("new", "holder", time.Minute)
	if len(h.m) != 1 || !h.heldFrom("new", "x") {
		t.Errorf("after a note into a memory full of ended names: %d names, new held %v; want only the new one", len(h.m), h.heldFrom("new", "x"))
	}
	// Full of live names: it starts over rather than grow.
	for i := range maxHeldNames {
		h.note(fmt.Sprint("live", i), "holder", time.Minute)
	}
	if len(h.m) > maxHeldNames {
		t.Errorf("the memory holds %d names; want at most %d", len(h.m), maxHeldNames)
	}
	h.note("one-more", "holder", time.Minute)
	if len(h.m) > maxHeldNames || !h.heldFrom("one-more", "x") {
		t.Errorf("after one more note: %d names (at most %d), newest held %v", len(h.m), maxHeldNames, h.heldFrom("one-more", "x"))
	}
}
