package redislease

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"time"
)

// DefaultPrefix is the key prefix of a Locker made without WithPrefix.
const DefaultPrefix = "lease:"

// The suffixes of a name's keys after its key base (see keyBase).
const (
	leaseSuffix    = ":lease"     // the tenure: a hash that expires with it
	tokenSuffix    = ":token"     // the last token: an integer that expires (tokenMemory)
	releasedSuffix = ":released:" // + token: the marker of a release (release.lua)
	marksSuffix    = ":marks"     // the waiters' marks by placement (marks.lua)
	lapsesSuffix   = ":lapses"    // when each mark lapses
)

// tokenMemory is how long a name's last token is kept after the server's
// clock has passed it (TOKEN_MEMORY_MS in acquire.lua, which must agree):
// the width of a backwards step of the server's clock that tokens survive.
// See "Tokens" in the package documentation.
const tokenMemory = 10 * time.Minute

// keyBase returns the part that every key of name starts with:
//
//	<prefix>{<base64url(sha256(name))>}
//
// The braces are a Redis Cluster hash tag: every key of the name hashes to
// the same slot, so one script can touch them all. The tag is a digest of
// the name, never the name itself, so a name with braces, NUL or 1024
// bytes of anything still gives fixed-length keys; the full name is stored
// inside the lease hash and every script checks it, so two names can
// never silently share a lease even if SHA-256 ever collided.
func (s *store) keyBase(name string) string {
	tag := tagOf(name)
	return s.key(&tag, "", "")
}

// keys returns the lease key and the token key of name:
//
//	<prefix>{<base64url(sha256(name))>}:lease
//	<prefix>{<base64url(sha256(name))>}:token
func (s *store) keys(name string) (leaseKey, tokenKey string) {
	tag := tagOf(name)
	return s.key(&tag, leaseSuffix, ""), s.key(&tag, tokenSuffix, "")
}

// leaseKey returns the lease key of name (the first of keys).
func (s *store) leaseKey(name string) string {
	tag := tagOf(name)
	return s.key(&tag, leaseSuffix, "")
}

// tag is the hash tag of a name's keys: base64url(sha256(name)).
type tag [43]byte

func tagOf(name string) (t tag) {
	sum := sha256.Sum256([]byte(name))
	base64.RawURLEncoding.Encode(t[:], sum[:])
	return t
}

// key returns <prefix>{<t>}<suffix><extra>, built in one allocation:
// every call on a lease builds its keys, so they are kept cheap.
func (s *store) key(t *tag, suffix, extra string) string {
	var b strings.Builder
	b.Grow(len(s.prefix) + len(t) + 2 + len(suffix) + len(extra))
	b.WriteString(s.prefix)
	b.WriteByte('{')
	b.Write(t[:])
	b.WriteByte('}')
	b.WriteString(suffix)
	b.WriteString(extra)
	return b.String()
}

// leasePattern is the SCAN MATCH pattern of every lease key under the
// store's prefix.
func (s *store) leasePattern() string {
	return globEscape(s.prefix) + "{*}" + leaseSuffix
}

// globEscape escapes the characters that are special in a Redis glob
// pattern, so a prefix matches only itself.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\', '^', '-':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
