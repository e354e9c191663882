package redislease

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// DefaultPrefix is the key prefix of a Locker made without WithPrefix.
const DefaultPrefix = "lease:"

// keys returns the lease key and the token counter key of name:
//
//	<prefix>{<base64url(sha256(name))>}:lease
//	<prefix>{<base64url(sha256(name))>}:token
//
// The braces are a Redis Cluster hash tag: both keys hash to the same slot,
// so one script can touch both. The tag is a digest of the name, never the
// name itself, so a name with braces, NUL or 1024 bytes of anything still
// gives one fixed-length key pair; the full name is stored inside the lease
// hash and every script checks it, so two names can never silently share a
// lease even if SHA-256 ever collided.
func (l *Locker) keys(name string) (leaseKey, tokenKey string) {
	sum := sha256.Sum256([]byte(name))
	base := l.prefix + "{" + base64.RawURLEncoding.EncodeToString(sum[:]) + "}"
	return base + ":lease", base + ":token"
}

// leasePattern is the SCAN MATCH pattern of every lease key under the
// Locker's prefix.
func (l *Locker) leasePattern() string {
	return globEscape(l.prefix) + "{*}:lease"
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
