package lease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"time"
)

// WithLogger makes Run log what happens to its lease through logger:
// acquired, busy, waiting, granted too late, renewal trouble, lost and
// released, at Info, Warn and Error (renewals that succeed at Debug, with
// their slack: how long before the Deadline they landed). Every line
// carries the lease's name, owner and, once acquired, token (see
// WithHashedNames). Run logs nothing without it.
func WithLogger(logger *slog.Logger) RunOption {
	return func(c *runConfig) { c.logger = logger }
}

// WithHashedNames makes Run's log lines carry the first 16 hex digits of
// the SHA-256 of the lease name ("lease.name_sha256") instead of the name,
// for names that are long or sensitive.
func WithHashedNames() RunOption {
	return func(c *runConfig) { c.hashNames = true }
}

// runLog logs one Run's events; its zero value (no logger) logs nothing.
type runLog struct {
	l     *slog.Logger
	attrs []slog.Attr
}

func newRunLog(logger *slog.Logger, name, owner string, ttl time.Duration, hashed bool) *runLog {
	if logger == nil {
		return &runLog{}
	}
	n := slog.String("lease.name", name)
	if hashed {
		sum := sha256.Sum256([]byte(name))
		n = slog.String("lease.name_sha256", hex.EncodeToString(sum[:8]))
	}
	return &runLog{l: logger, attrs: []slog.Attr{n, slog.String("lease.owner", owner), slog.Duration("lease.ttl", ttl)}}
}

// held adds the token of the tenure acquired to every later line.
func (r *runLog) held(l Lease) {
	if r.l != nil {
		r.attrs = append(r.attrs, slog.Uint64("lease.token", l.Token))
	}
}

func (r *runLog) log(level slog.Level, msg string, attrs ...slog.Attr) {
	if r == nil || r.l == nil {
		return
	}
	ctx := context.Background()
	if !r.l.Enabled(ctx, level) {
		return
	}
	r.l.LogAttrs(ctx, level, msg, append(r.attrs[:len(r.attrs):len(r.attrs)], attrs...)...)
}
