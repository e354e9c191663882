// Package sqlurl is what the dialect packages of backend/sql share to open
// a Locker from a URL: the query parameters every SQL URL takes (table,
// autocreate, max_conns, max_idle_conns), the error prefix, and the registration with lease.Open. A
// dialect package supplies only its own parameters and the translation of
// the URL into its driver's connector.
package sqlurl

import (
	"context"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/leasekit/lease"
	sqllease "github.com/leasekit/lease/backend/sql"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/redact"
)

// Dialect is one dialect package's side of opening a URL.
// Common are the query parameters of every SQL scheme, which are the
// Locker's, never the driver's.
var Common = []string{"table", "autocreate", "max_conns", "max_idle_conns"}

// Ours reports whether k is one of Common.
func Ours(k string) bool {
	for _, c := range Common {
		if c == k {
			return true
		}
	}
	return false
}

type Dialect struct {
	// Dialect is the SQL dialect the connector speaks.
	Dialect sqllease.Dialect
	// Params are the query parameters the dialect takes besides the
	// common ones (Common).
	Params []string
	// PassAll, when set, lets every other parameter through to the
	// Connector, whose driver judges it (and the server, for run-time
	// settings), instead of refusing it here. Each must still appear once.
	PassAll bool
	// Aliases maps other names of common parameters (pgxpool's
	// pool_max_conns) to theirs.
	Aliases map[string]string
	// Connector turns the URL and its checked query into a connector.
	// Its errors must not quote the URL, which may hold a password.
	Connector func(u *url.URL, q url.Values) (sqldriver.Connector, error)
	// Options, if set, adds options of the dialect's own for the URL
	// (PostgreSQL's Listener), before the caller's.
	Options func(u *url.URL, q url.Values) ([]sqllease.Option, error)
}

// OpenRaw is a dialect package's Open: it parses rawURL once, without
// letting a password reach the error, and opens it.
func (d Dialect) OpenRaw(ctx context.Context, rawURL string, opts []sqllease.Option) (*sqllease.Locker, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("lease/sql: open: %w: URL %s does not parse: %s%s", lease.ErrInvalid, driver.Redact(rawURL), parseReason(err), redact.DSNHint(rawURL))
	}
	return d.Open(ctx, u, opts)
}

// quoted matches what url.Parse's reasons quote from the URL.
var quoted = regexp.MustCompile(`"[^"]*"`)

// parseReason is why url.Parse refused a URL, without the parts of the URL
// it quotes: a '#' or '/' in an unescaped password makes the password read
// as a port ("invalid port \":Hunter2\" after host"), a '%' in one as an
// escape.
func parseReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return quoted.ReplaceAllString(err.Error(), `"…"`)
}

// Open opens a Locker for u, which lease.Open or OpenRaw parsed. Options
// given by the caller come after the URL's, so they win.
func (d Dialect) Open(ctx context.Context, u *url.URL, opts []sqllease.Option) (*sqllease.Locker, error) {
	known := append(append([]string{}, Common...), d.Params...)
	if d.PassAll {
		// Every parameter is known, but each only once.
		known = nil
		raw, _ := url.ParseQuery(u.RawQuery)
		for k := range raw {
			known = append(known, k)
		}
	}
	q, err := driver.URLQuery(u, known...)
	if err != nil {
		return nil, fmt.Errorf("lease/sql: open: %w", err)
	}
	if d.PassAll {
		for k := range q {
			if ours, near := nearOurs(k); near {
				return nil, fmt.Errorf("lease/sql: open: %w: unknown query parameter %q: did you mean %s?", lease.ErrInvalid, k, ours)
			}
		}
	}
	for alias, name := range d.Aliases {
		if v, ok := q[alias]; ok {
			if q.Has(name) {
				return nil, fmt.Errorf("lease/sql: open: %w: %s and %s are the same setting: give one", lease.ErrInvalid, alias, name)
			}
			q[name] = v
			delete(q, alias)
		}
	}
	urlOpts := []sqllease.Option{sqllease.WithDialect(d.Dialect)}
	if t := q.Get("table"); t != "" {
		urlOpts = append(urlOpts, sqllease.WithTable(t))
	}
	if v := q.Get("autocreate"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("lease/sql: open: %w: autocreate=%q is not a boolean", lease.ErrInvalid, v)
		}
		if !b {
			urlOpts = append(urlOpts, sqllease.WithoutAutoCreate())
		}
	}
	pool, err := poolSize(q)
	if err != nil {
		return nil, fmt.Errorf("lease/sql: open: %w", err)
	}
	if pool != nil {
		urlOpts = append(urlOpts, pool)
	}
	c, err := d.Connector(u, q)
	if err != nil {
		return nil, fmt.Errorf("lease/sql: open: %w", err)
	}
	if d.Options != nil {
		more, err := d.Options(u, q)
		if err != nil {
			return nil, fmt.Errorf("lease/sql: open: %w", err)
		}
		urlOpts = append(urlOpts, more...)
	}
	return sqllease.OpenConnector(ctx, c, append(urlOpts, opts...)...)
}

// nearOurs reports whether k, which is not one of Common, is probably one
// of them misspelt: the same but for case, '_' and '-' (maxConns,
// max-conns), or at most two letters added, dropped, changed or swapped
// (tabel, max_con). A dialect that passes other parameters to its server
// would otherwise send it there, and the server refuse a setting the user
// never meant. No PostgreSQL setting or MySQL system variable is that
// close to one of Common.
func nearOurs(k string) (string, bool) {
	if Ours(k) {
		return "", false
	}
	fold := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
	}
	for _, c := range Common {
		if fold(k) == fold(c) || editDistance(strings.ToLower(k), c) <= 2 {
			return c, true
		}
	}
	return "", false
}

// editDistance is the optimal string alignment distance between a and b:
// the fewest bytes inserted, deleted, replaced, or swapped with their
// neighbour to turn a into b.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// poolSize is the URL's max_conns and max_idle_conns as a WithPoolSize
// option, nil when it has neither. max_idle_conns defaults to
// sqllease.DefaultMaxIdleConns, or max_conns when that is fewer.
func poolSize(q url.Values) (sqllease.Option, error) {
	open, idle := sqllease.DefaultMaxOpenConns, sqllease.DefaultMaxIdleConns
	vo, vi := q.Get("max_conns"), q.Get("max_idle_conns")
	if vo == "" && vi == "" {
		return nil, nil
	}
	if vo != "" {
		n, err := strconv.Atoi(vo)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: max_conns=%q is not a number of connections, at least 1", lease.ErrInvalid, vo)
		}
		open, idle = n, min(idle, n)
	}
	if vi != "" {
		n, err := strconv.Atoi(vi)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: max_idle_conns=%q is not a number of connections, 0 or more", lease.ErrInvalid, vi)
		}
		if n > open {
			return nil, fmt.Errorf("%w: max_idle_conns=%d is more than max_conns (%d)", lease.ErrInvalid, n, open)
		}
		idle = n
	}
	return sqllease.WithPoolSize(open, idle), nil
}

// Register makes lease.Open open the dialect's schemes.
func (d Dialect) Register(schemes ...string) {
	opener := func(ctx context.Context, u *url.URL) (lease.Locker, error) {
		l, err := d.Open(ctx, u, nil)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return l, nil
	}
	for _, s := range schemes {
		lease.Register(s, opener)
	}
}
