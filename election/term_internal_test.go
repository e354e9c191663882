package election

import (
	"errors"
	"strings"
	"testing"

	"github.com/leasekit/lease"
)

func TestOwnerRoundTrip(t *testing.T) {
	for _, c := range []struct{ id, md string }{
		{"node-a", ""},
		{"node-a", "10.0.0.5:8080"},
		{"pod/ns:web-7f9c", "a b  c "},             // spaces in metadata, trailing too
		{"ü", "0123456789ab ü \t\n"},               // a nonce-like start, any UTF-8
		{"n", strings.Repeat("m", 255-1-1-12-1)},   // the longest metadata
		{strings.Repeat("i", 255-1-12), ""},        // the longest ID
		{"host:123", " leading space in metadata"}, // the metadata's own space survives
	} {
		if err := checkID(c.id); err != nil {
			t.Fatalf("checkID(%q): %v", c.id, err)
		}
		if err := checkMetadata(c.id, c.md); err != nil {
			t.Fatalf("checkMetadata(%q, %.20q): %v", c.id, c.md, err)
		}
		owner := encodeOwner(c.id, c.md, newNonce())
		if len(owner) > lease.MaxOwnerLen {
			t.Fatalf("owner of %q is %d bytes", c.id, len(owner))
		}
		id, md, ok := parseOwner(owner)
		if !ok || id != c.id || md != c.md {
			t.Errorf("parseOwner(%q) = %q, %q, %v; want %q, %q", owner, id, md, ok, c.id, c.md)
		}
	}
}

func TestNonceIsFreshHex(t *testing.T) {
	a, b := newNonce(), newNonce()
	if len(a) != nonceLen || !isNonce(a) || a == b {
		t.Fatalf("nonces %q, %q: want two different %d-digit lowercase hex strings", a, b, nonceLen)
	}
}

// Owners not made by this package are not taken apart: termOf reports
// them whole as the leader.
func TestParseOwnerRefusesOtherForms(t *testing.T) {
	for _, owner := range []string{
		"host:123:abcdef012345:1",   // lease.NewOwner
		"worker-1",                  // no space
		" 0123456789ab",             // empty ID
		"a 0123456789a",             // short nonce
		"a 0123456789AB",            // upper-case nonce
		"a 0123456789abX",           // nonce not followed by a space
		"a 0123456789ab ",           // a space without metadata
		"a 0123456789xy metadata z", // not hex
	} {
		if id, md, ok := parseOwner(owner); ok {
			t.Errorf("parseOwner(%q) = %q, %q, true; want false", owner, id, md)
		}
		tm := termOf(lease.Lease{Name: "o", Owner: owner, Token: 3})
		if tm.Leader != owner || tm.Metadata != "" || tm.Number != 3 {
			t.Errorf("termOf(owner %q) = %+v; want the owner as leader, no metadata", owner, tm)
		}
	}
}

func TestCheckIDAndMetadata(t *testing.T) {
	for _, id := range []string{"", "a b", "a\tb", "a\nb", "a\x00b", "a\x7fb", "\xff", strings.Repeat("i", 255-12)} {
		if err := checkID(id); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("checkID(%q) = %v; want an error matching lease.ErrInvalid", id, err)
		}
	}
	for _, md := range []string{"a\x00b", "\xff", strings.Repeat("m", 255-1-1-12-1+1)} {
		if err := checkMetadata("n", md); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("checkMetadata(%.20q) = %v; want an error matching lease.ErrInvalid", md, err)
		}
	}
	err := checkMetadata("node-a", strings.Repeat("m", 300))
	if want := "room for 235"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("checkMetadata of 300 bytes: %v; want the message to say %q", err, want)
	}
}

func TestDefaultID(t *testing.T) {
	id := defaultID()
	if err := checkID(id); err != nil {
		t.Fatalf("defaultID() = %q: %v", id, err)
	}
	if !strings.Contains(id, ":") {
		t.Errorf("defaultID() = %q; want hostname:pid", id)
	}
}
