package lease

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
)

var (
	ownerPrefix = makeOwnerPrefix()
	ownerSeq    atomic.Uint64
)

func makeOwnerPrefix() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	host = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '_'
		}
		return r
	}, host)
	if len(host) > 64 {
		host = host[:64]
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("lease: crypto/rand failed: " + err.Error())
	}
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// NewOwner returns an owner identity that no other call, in this process or
// any other, returns: "host:pid:random:sequence". The host and pid prefix is
// for people reading Inspect output; uniqueness comes from the random part
// and the per-process sequence. Unlike a per-process identity, two calls in
// one process get different owners, so two goroutines never both hold a
// lease.
func NewOwner() string {
	return fmt.Sprintf("%s:%d", ownerPrefix, ownerSeq.Add(1))
}
