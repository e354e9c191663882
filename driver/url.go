package driver

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/redact"
)

// Redact returns rawURL with every secret masked: the password in the
// user information and the values of query parameters named like
// passwords. It masks even a URL that does not parse, so its result is
// always safe to put in an error or a log line.
func Redact(rawURL string) string { return redact.URL(rawURL) }

// ParseURL parses rawURL for a backend's Open. Its error matches
// lease.ErrInvalid and, unlike url.Parse's, does not quote the URL, which
// may hold a password.
func ParseURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: URL %s does not parse: %v", lease.ErrInvalid, Redact(rawURL), redact.ParseError(err))
	}
	return u, nil
}

// URLQuery returns u's query parameters after checking that each is one of
// known and appears once, so that a misspelt option is an error matching
// lease.ErrInvalid rather than silently ignored.
func URLQuery(u *url.URL, known ...string) (url.Values, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: query of %s URL: %v", lease.ErrInvalid, u.Scheme, err)
	}
	for k, v := range q {
		if !slices.Contains(known, k) {
			if len(known) == 0 {
				return nil, fmt.Errorf("%w: %s URL takes no query parameters, got %q", lease.ErrInvalid, u.Scheme, k)
			}
			return nil, fmt.Errorf("%w: unknown query parameter %q in %s URL (known: %s)", lease.ErrInvalid, k, u.Scheme, strings.Join(known, ", "))
		}
		if len(v) > 1 {
			return nil, fmt.Errorf("%w: query parameter %q given %d times in %s URL", lease.ErrInvalid, k, len(v), u.Scheme)
		}
	}
	return q, nil
}
