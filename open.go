package lease

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/leasekit/lease/internal/redact"
)

// Opener opens a Locker from a parsed URL whose scheme it was registered
// for. It must reject query parameters it does not know with an error
// matching ErrInvalid, must return by the time ctx ends, and the Locker's
// Close must close whatever the Opener opened. Its errors need not repeat
// the URL: Open adds it, with secrets masked.
type Opener func(ctx context.Context, u *url.URL) (Locker, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Opener{}
)

// Register makes a backend available to Open under scheme (lower case,
// without "://"). Backend packages call it from init, as database/sql
// drivers do, so importing a backend is what makes its scheme work.
// Register panics if scheme is registered twice or opener is nil.
func Register(scheme string, opener Opener) {
	scheme = strings.ToLower(scheme)
	if opener == nil {
		panic("lease: Register opener is nil for scheme " + scheme)
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[scheme]; dup {
		panic("lease: Register called twice for scheme " + scheme)
	}
	registry[scheme] = opener
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(registry))
	for s := range registry {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// schemeHints names the package that registers each scheme of this module,
// for the error of an Open whose backend was not imported.
var schemeHints = map[string]string{
	"mem":        "github.com/leasekit/lease/backend/memory",
	"sqlite":     "github.com/leasekit/lease/backend/sql/sqlite",
	"postgres":   "github.com/leasekit/lease/backend/sql/postgres",
	"postgresql": "github.com/leasekit/lease/backend/sql/postgres",
	"mysql":      "github.com/leasekit/lease/backend/sql/mysql",
	"redis":      "github.com/leasekit/lease/backend/redis",
	"rediss":     "github.com/leasekit/lease/backend/redis",
	"etcd":       "github.com/leasekit/lease/backend/etcd",
}

// Open opens a Locker for a URL, picking the backend by scheme:
//
//	mem://                         a fresh in-memory store (backend/memory)
//	sqlite:///var/lib/app/lease.db a SQLite file (backend/sql/sqlite)
//	postgres://user@host/db        PostgreSQL (backend/sql/postgres)
//	mysql://user:pass@host/db      MySQL or MariaDB (backend/sql/mysql)
//	redis://host:6379/0            Redis (backend/redis)
//	etcd://host:2379,host:2379     etcd (backend/etcd)
//
// The backend's package must be imported (for its side effect, or through
// github.com/leasekit/lease/backend/all); an unknown scheme's error names
// the import that is probably missing. Options are query parameters,
// listed in the README; an unknown one is an error. Close the returned
// Locker to close what Open opened.
func Open(ctx context.Context, rawURL string) (Locker, error) {
	if hostPort.MatchString(rawURL) {
		return nil, fmt.Errorf("%w: backend %q is a host and port, not a URL: name the store, e.g. redis://%s, postgres://user@%s/db or etcd://%s", ErrInvalid, rawURL, rawURL, rawURL, rawURL)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: backend URL %s does not parse: %v", ErrInvalid, redact.URL(rawURL), redact.ParseError(err))
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("%w: backend URL %q has no scheme (want e.g. sqlite:///path/lease.db or redis://host:6379)", ErrInvalid, redact.URL(rawURL))
	}
	scheme := strings.ToLower(u.Scheme)
	registryMu.RLock()
	opener := registry[scheme]
	registryMu.RUnlock()
	if opener == nil {
		if pkg, ok := schemeHints[scheme]; ok {
			return nil, fmt.Errorf("%w: no backend registered for scheme %q: import _ %q (or github.com/leasekit/lease/backend/all)", ErrInvalid, scheme, pkg)
		}
		return nil, fmt.Errorf("%w: unknown backend scheme %q (registered: %s)", ErrInvalid, scheme, strings.Join(Schemes(), ", "))
	}
	l, err := opener(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("lease: open %s: %w", redact.URL(rawURL), err)
	}
	return l, nil
}

// hostPort matches "127.0.0.1:6379", "localhost:5432" and "[::1]:2379":
// an address given where a URL was wanted.
var hostPort = regexp.MustCompile(`^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]+$`)
