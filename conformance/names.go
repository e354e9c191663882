package conformance

import (
	"fmt"
	"strings"
	"testing"

	"github.com/leasekit/lease"
)

// awkward are name suffixes that stores tend to conflate: case, trailing
// spaces, Unicode normalization and collation, key separators, hash-tag
// braces, NUL and other control bytes, SQL and glob metacharacters.
var awkward = []string{
	"a", "A", "a ", " a", "a\t", "ß", "ss", "é", "e\u0301", "İ", "i",
	"a/b", "a:b", "a.b", "a|b", "{a}", "a{b}c", "{", "}", "{}", "}{",
	"a\x00b", "a\x00", "a\nb", "a\rb", "\x7f",
	"a%", "a_", "a*", "a?", "a[b]", "a'b", `a"b`, `a\b`, "a;b--",
	"日本語", "🙂", "\u200b", "\uFEFFa",
}

// Contract line 8: every valid name is its own lease.

// awkwardNames: names with awkward characters never collide.
func awkwardNames(t testing.TB, s *suite) {
	l := s.locker(t)
	base := s.name("")
	var held []lease.Lease
	for i, suffix := range awkward {
		got, _ := s.acquire(t, l, base+suffix, fmt.Sprintf("owner-%d", i), long)
		held = append(held, got)
	}
	for _, h := range held {
		s.mustHold(t, l, h, fmt.Sprintf("name %q among similar names", h.Name))
	}
}

// longNamesSharingAPrefix: long names sharing a 1000-byte prefix do not collide.
func longNamesSharingAPrefix(t testing.TB, s *suite) {
	l := s.locker(t)
	base := s.name("")
	base += strings.Repeat("p", 1000-len(base))
	var held []lease.Lease
	for i := 0; i < 8; i++ {
		suffix := fmt.Sprintf("%024d", i) // names of exactly 1024 bytes
		if i%2 == 1 {
			suffix = suffix[:len(suffix)-1-i] // and a few shorter ones
		}
		got, _ := s.acquire(t, l, base+suffix, fmt.Sprintf("owner-%d", i), long)
		held = append(held, got)
	}
	for _, h := range held {
		s.mustHold(t, l, h, fmt.Sprintf("a %d-byte name sharing a 1000-byte prefix", len(h.Name)))
	}
	_, err := l.Acquire(t.Context(), held[0].Name, "intruder", long)
	s.mustBeHeld(t, "Acquire of a long name by another owner", err, held[0].Name, held[0].Owner, long)
}
