package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"

	"github.com/leasekit/lease"
)

// backendEnv names the store when --backend is not given.
const backendEnv = "LEASE_BACKEND"

// backendURL returns the store's URL: --backend, else $LEASE_BACKEND,
// else the default SQLite file, whose directory it creates.
func (g *globals) backendURL() (string, error) {
	if g.backend != "" {
		return g.backend, nil
	}
	if env := os.Getenv(backendEnv); env != "" {
		return env, nil
	}
	return defaultBackend()
}

// defaultBackend returns the URL of a SQLite file in the user's cache
// directory, so that lease works with nothing installed. Every lease
// command run by one user on one machine shares it.
func defaultBackend() (string, error) {
	if !slices.Contains(lease.Schemes(), "sqlite") {
		return "", failf(exitUsage, "no --backend or $%s, and this lease was built without SQLite (-tags lease_nosqlite), the default store: name a store, e.g. --backend redis://127.0.0.1:6379", backendEnv)
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", failf(exitUsage, "no --backend or $%s, and no cache directory for the default SQLite file: %v", backendEnv, err)
	}
	dir = filepath.Join(dir, "lease")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", failf(exitFailure, "creating the default store's directory: %v", err)
	}
	u := url.URL{Scheme: "sqlite", Path: filepath.ToSlash(filepath.Join(dir, "lease.db"))}
	return u.String(), nil
}

// open opens the store, within --timeout (or the limit lease run set). A
// malformed URL is a usage error; an unreachable store a failure.
func (g *globals) open(ctx context.Context) (lease.Locker, error) {
	raw, err := g.backendURL()
	if err != nil {
		return nil, err
	}
	limit, by := g.openLimit()
	ctx, cancel := g.bound(ctx, limit, by)
	defer cancel()
	l, err := bounded(ctx, func(ctx context.Context) (lease.Locker, error) { return lease.Open(ctx, raw) },
		func(l lease.Locker) { _ = l.Close() })
	if err != nil {
		if errors.Is(err, lease.ErrInvalid) {
			return nil, failf(exitUsage, "%v", err)
		}
		return nil, g.storeError(ctx, err)
	}
	return l, nil
}

// closeLocker closes l and keeps the first error.
func closeLocker(l lease.Locker, err *error) {
	if cerr := l.Close(); cerr != nil && *err == nil {
		*err = fmt.Errorf("closing the store: %w", cerr)
	}
}
