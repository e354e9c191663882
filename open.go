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
	"mem":             "github.com/leasekit/lease/backend/memory",
	"sqlite":          "github.com/leasekit/lease/backend/sql/sqlite",
	"postgres":        "github.com/leasekit/lease/backend/sql/postgres",
	"postgresql":      "github.com/leasekit/lease/backend/sql/postgres",
	"mysql":           "github.com/leasekit/lease/backend/sql/mysql",
	"redis":           "github.com/leasekit/lease/backend/redis",
	"rediss":          "github.com/leasekit/lease/backend/redis",
	"redis+sentinel":  "github.com/leasekit/lease/backend/redis",
	"rediss+sentinel": "github.com/leasekit/lease/backend/redis",
	"redis+cluster":   "github.com/leasekit/lease/backend/redis",
	"rediss+cluster":  "github.com/leasekit/lease/backend/redis",
	"etcd":            "github.com/leasekit/lease/backend/etcd",
	"etcds":           "github.com/leasekit/lease/backend/etcd",
}

// Open opens a Locker for a URL, picking the backend by scheme:
//
//	mem://                         a fresh in-memory store (backend/memory)
//	sqlite:///var/lib/app/lease.db a SQLite file (backend/sql/sqlite)
//	postgres://user@host/db        PostgreSQL (backend/sql/postgres)
//	mysql://user:pass@host/db      MySQL or MariaDB (backend/sql/mysql)
//	redis://host:6379/0            Redis (backend/redis)
//	redis+sentinel://h:26379,h:26379/0?master_name=M  Redis by its Sentinels
//	redis+cluster://h:7000,h:7001  a Redis Cluster
//	etcd://host:2379,host:2379     etcd (backend/etcd; etcds:// for TLS)
//
// The backend's package must be imported (for its side effect, or through
// github.com/leasekit/lease/backend/all); an unknown scheme's error names
// the import that is probably missing. An address without a scheme
// ("localhost:5432", "127.0.0.1:6379/0") is refused with an error that
// shows it as a URL, by its port where the port says which store it is.
// Options are query parameters, listed in each backend's package
// documentation and in docs/backends.md; an unknown one is an error. No error of Open shows a password. Close the returned Locker to
// close what Open opened.
func Open(ctx context.Context, rawURL string) (Locker, error) {
	if err := noScheme(rawURL); err != nil {
		return nil, err
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: backend URL %s does not parse: %v%s", ErrInvalid, redact.URL(rawURL), redact.ParseError(err), redact.DSNHint(rawURL))
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

// address matches an address given where a URL was wanted, with what
// usually comes with it: "127.0.0.1:6379", "localhost:5432/app",
// "app:secret@db:3306/app", "[::1]:2379". Its groups are the user
// information with its '@', the host, the port, and the path and query.
// url.Parse reads such a string as a URL whose scheme is its host or user
// name ("unknown backend scheme localhost"), or refuses it.
var address = regexp.MustCompile(`^([^/?#]*@)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})([/?].*)?$`)

// schemeByPort is the scheme of a server's usual port, for the error of
// an address given without one.
var schemeByPort = map[string]string{
	"5432":  "postgres",
	"3306":  "mysql",
	"6379":  "redis",
	"6380":  "rediss",
	"26379": "redis+sentinel",
	"2379":  "etcd",
}

// noScheme returns an error matching ErrInvalid that shows the URL form
// when rawURL is an address without a scheme, and nil otherwise. The
// error masks any password rawURL holds.
func noScheme(rawURL string) error {
	if strings.Contains(rawURL, "://") {
		return nil
	}
	m := address.FindStringSubmatch(rawURL)
	if m == nil {
		return nil
	}
	// url.Parse has no scheme to read the user information by, so mask
	// it as one with a scheme would be.
	shown := func(scheme, suffix string) string {
		rest := m[4]
		if rest == "" {
			rest = suffix
		}
		return redact.URL(scheme + "://" + m[1] + m[2] + ":" + m[3] + rest)
	}
	given := strings.TrimPrefix(shown("x", ""), "x://")
	var forms []string
	switch scheme := schemeByPort[m[3]]; scheme {
	case "postgres", "mysql":
		forms = []string{shown(scheme, "/db")}
	case "redis", "rediss":
		forms = []string{shown(scheme, "/0")}
	case "redis+sentinel":
		forms = []string{shown(scheme, "/0?master_name=mymaster")}
	case "etcd":
		forms = []string{shown(scheme, "")}
	default:
		forms = []string{shown("redis", "/0"), shown("postgres", "/db"), shown("mysql", "/db"), shown("etcd", "")}
	}
	return fmt.Errorf("%w: backend %q has no scheme: write it as a URL, e.g. %s", ErrInvalid, given, strings.Join(forms, " or "))
}
