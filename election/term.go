package election

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/leasekit/lease"
)

// Term is one tenure of an office: who leads it, under which number, and
// what the leader published. The zero Number means the office is vacant.
type Term struct {
	// Office is the office's name: the lease name the candidates campaign
	// for.
	Office string
	// Number is the term number: the fencing token of the leader's
	// lease, strictly greater than the number of every earlier term of
	// the office on the same store. Pass it with every write the leader
	// makes (see package fence). Zero when the office is vacant.
	Number uint64
	// Leader is the leading candidate's ID (see WithID); empty when the
	// office is vacant. When the lease is held by a program that does not
	// use this package (its owner is not in the encoding described in the
	// package documentation), Leader is that owner string, whole.
	Leader string
	// Metadata is what the leader published with WithMetadata, such as
	// the address it serves on; empty if it published nothing.
	Metadata string
	// Owner is the lease's owner string, as lease.Locker.Inspect and the
	// lease command's "list" show it: Leader, a nonce and Metadata,
	// encoded as the package documentation describes.
	Owner string
	// Expires is when the store will end the term unless the leader
	// renews it, by the store's clock, as of when the term was read. It is
	// for display: never compare it with this process's clock to decide
	// anything.
	Expires time.Time
}

// Vacant reports whether t says that nobody leads the office.
func (t Term) Vacant() bool { return t.Number == 0 }

// String describes t for logs: "office "x": term 7, leader "node-a"
// (metadata "10.0.0.5:8080")", or "office "x": no leader".
func (t Term) String() string {
	if t.Vacant() {
		return fmt.Sprintf("office %q: no leader", t.Office)
	}
	s := fmt.Sprintf("office %q: term %d, leader %q", t.Office, t.Number, t.Leader)
	if t.Metadata != "" {
		s += fmt.Sprintf(" (metadata %q)", t.Metadata)
	}
	return s
}

// termOf is the Term a lease describes: held by the candidate whose ID
// and metadata its owner encodes, or, when the owner is not in that
// encoding, by the owner string itself.
func termOf(l lease.Lease) Term {
	t := Term{Office: l.Name, Number: l.Token, Owner: l.Owner, Expires: l.Expires}
	if id, md, ok := parseOwner(l.Owner); ok {
		t.Leader, t.Metadata = id, md
	} else {
		t.Leader = l.Owner
	}
	return t
}

// The owner encoding: ID, a space, nonceLen lowercase hex digits, and,
// when there is metadata, a space and the metadata. IDs contain no space,
// so the first space ends the ID; the nonce has a fixed length, so the
// metadata may contain anything a lease owner may (any UTF-8 but NUL).
const (
	nonceLen = 12
	// overhead is what the encoding adds to an ID: the space and the
	// nonce.
	overhead = 1 + nonceLen
)

// encodeOwner is the lease owner of a term of candidate id with metadata
// md and a fresh nonce.
func encodeOwner(id, md, nonce string) string {
	if md == "" {
		return id + " " + nonce
	}
	return id + " " + nonce + " " + md
}

// parseOwner splits an owner made by encodeOwner into ID and metadata. It
// reports false for an owner in any other form.
func parseOwner(owner string) (id, md string, ok bool) {
	id, rest, found := strings.Cut(owner, " ")
	if !found || id == "" || len(rest) < nonceLen || !isNonce(rest[:nonceLen]) {
		return "", "", false
	}
	switch rest = rest[nonceLen:]; {
	case rest == "":
		return id, "", true
	case rest[0] == ' ' && len(rest) > 1:
		return id, rest[1:], true
	}
	return "", "", false
}

func isNonce(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// newNonce returns nonceLen random hex digits. Every term of a candidate
// gets a fresh one, so that two candidates given the same ID, or one
// candidate campaigning again while its lost tenure lingers in the store,
// never share a tenure (a lease owner that Acquires again re-enters its
// tenure).
func newNonce() string {
	var b [nonceLen / 2]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand crashes the program instead)
	return hex.EncodeToString(b[:])
}

// checkID reports whether id can be a candidate's ID: non-empty UTF-8,
// without spaces or control characters, short enough to leave room for
// the nonce in a lease owner. The error matches lease.ErrInvalid.
func checkID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: election: the candidate ID is empty", lease.ErrInvalid)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: election: the candidate ID %q is not valid UTF-8", lease.ErrInvalid, id)
	case len(id) > lease.MaxOwnerLen-overhead:
		return fmt.Errorf("%w: election: the candidate ID is %d bytes, longer than the limit of %d (a lease owner holds %d bytes, %d of them taken by a space and a nonce)",
			lease.ErrInvalid, len(id), lease.MaxOwnerLen-overhead, lease.MaxOwnerLen, overhead)
	}
	for _, r := range id {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("%w: election: the candidate ID %q contains %q: IDs are printed on one line and end at the first space, so they may not contain spaces or control characters", lease.ErrInvalid, id, r)
		}
	}
	return nil
}

// checkMetadata reports whether md can be published by the candidate id:
// UTF-8 without NUL, and short enough that ID, nonce and metadata fit in
// a lease owner. The error matches lease.ErrInvalid.
func checkMetadata(id, md string) error {
	room := lease.MaxOwnerLen - overhead - len(id) - 1 // the metadata's space
	switch {
	case !utf8.ValidString(md):
		return fmt.Errorf("%w: election: the metadata %q is not valid UTF-8", lease.ErrInvalid, md)
	case strings.IndexByte(md, 0) >= 0:
		return fmt.Errorf("%w: election: the metadata %q contains a NUL byte, which no store keeps in a lease owner", lease.ErrInvalid, md)
	case md != "" && len(md) > room:
		return fmt.Errorf("%w: election: the metadata is %d bytes; with the %d-byte candidate ID %q there is room for %d (a lease owner holds %d bytes: the ID, a space, a %d-digit nonce, a space and the metadata)",
			lease.ErrInvalid, len(md), len(id), id, max(room, 0), lease.MaxOwnerLen, nonceLen)
	}
	return nil
}
