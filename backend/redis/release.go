package redislease

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/leasekit/lease/driver"
)

// releaseMarkerTTL is how long release.lua keeps the marker that lets a
// resend of one Release call recognise the release it already made.
//
// A resend lives only inside the Release call that sent it: go-redis
// resends a command whose connection failed or timed out, up to its
// MaxRetries (3 by default), before the call returns, and never after. So
// the marker must last from the first attempt's execution to the last
// resend's, and the longest such span is a resend after each attempt's
// reply was lost in silence: each attempt waits out the client's
// ReadTimeout (5s by default, or the context's deadline with
// ContextTimeoutEnabled) plus a backoff of at most MaxRetryBackoff (512ms).
// For a default client that is 3 × 5.5s ≈ 17s; a minute covers it with
// margin, covers read timeouts up to 15s, and covers lease.Run's releases
// (bounded by min(ttl, 10s)). The tenure's remaining ttl would be the
// wrong bound: a 50ms lease released just before it ends must still
// recognise a resend sent 5s later. The cost is one key of about 150
// bytes per Release in the last minute.
const releaseMarkerTTL = time.Minute

// Release implements driver.Store with one run of release.lua: it deletes
// the lease key when it still holds t's owner and token and reports ok;
// otherwise it changes nothing and reports ok false. The name's token key
// is left alone, so the next tenure gets a larger token.
//
// Its outcome is exact under go-redis's resends. Each call sends a nonce
// of its own (nextNonce); when the script ends the tenure it also writes the nonce to a
// marker key of that tenure (<prefix>{<tag>}:released:<token>, in the
// same hash slot), which expires after releaseMarkerTTL. A resend of the
// same call, finding the tenure gone and its own nonce in the marker,
// reports the release it already made instead of a lost lease; a second,
// separate Release of the lease carries another nonce and reports it lost.
// Nothing else reads the marker: a released name is free at once.
//
// The script also chooses whose turn it is among the name's waiters (see
// turns.go) and names that waiter in the message it publishes.
func (s *store) Release(ctx context.Context, t driver.Tenure) (bool, error) {
	return s.release(ctx, t, nextNonce())
}

// nonceSeq numbers the Release calls of this process; noncePrefix, random
// per process, sets them apart from every other process's.
var (
	nonceSeq    atomic.Uint64
	noncePrefix = rand.Text()
)

// nextNonce returns a nonce no other Release call has: this process's
// random prefix (130 bits) and the call's number. A counter costs less
// than reading 128 random bits on every Release and is just as unique.
func nextNonce() string {
	b := make([]byte, 0, len(noncePrefix)+14)
	b = append(b, noncePrefix...)
	b = append(b, '.')
	return string(strconv.AppendUint(b, nonceSeq.Add(1), 36))
}

// release is Release with the call's nonce given.
func (s *store) release(ctx context.Context, t driver.Tenure, nonce string) (bool, error) {
	tag := tagOf(t.Name)
	token := strconv.FormatUint(t.Token, 10)
	keys := []string{s.key(&tag, leaseSuffix, ""), s.key(&tag, releasedSuffix, token), s.key(&tag, marksSuffix, ""), s.key(&tag, lapsesSuffix, "")}
	v, err := s.call(ctx, releaseScript, false, keys,
		t.Name, t.Owner, token, nonce, releaseMarkerTTL.Milliseconds())
	if err != nil {
		return false, callErr(ctx, err)
	}
	n, ok := v.(int64)
	if !ok {
		return false, fmt.Errorf("unexpected script reply %#v", v)
	}
	return n == 1, nil
}
