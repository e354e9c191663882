// Package redact keeps secrets in URLs out of errors and logs. It is used
// by the root package's Open and by package driver, which re-exports it
// for backends.
package redact

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces a secret.
const Mask = "xxxxx"

// secretParams are query parameters whose values are secrets.
var secretParams = map[string]bool{
	"password": true, "passwd": true, "pwd": true, "pass": true,
	"sslpassword": true, "secret": true, "token": true, "auth": true,
}

// secretParam reports whether a query parameter's value is a secret: one
// of secretParams, or a name that ends in one of them after an '_' or '-'
// (sentinel_password, client-secret, auth_token).
func secretParam(name string) bool {
	name = strings.ToLower(name)
	if secretParams[name] {
		return true
	}
	if i := strings.LastIndexAny(name, "_-"); i >= 0 {
		return secretParams[name[i+1:]]
	}
	return false
}

// URL returns raw with every secret replaced by Mask: the password of the
// user information and the values of query parameters named like
// passwords. It never returns the raw string when it cannot parse it: a
// URL that fails to parse (a bad escape, a '#' or '/' in an unescaped
// password) is masked from the scheme's "//" to its last '@', keeping
// only a user name that contains none of ':', '/', '?', '#'.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err == nil && u.Opaque == "" {
		if u.User != nil {
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), Mask)
			}
		}
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			// A query that does not parse may hide a secret anywhere.
			u.RawQuery = Mask
			return u.String()
		}
		masked := false
		for k := range q {
			if secretParam(k) {
				q[k] = []string{Mask}
				masked = true
			}
		}
		if masked {
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return byHand(raw)
}

// byHand masks a URL that url.Parse refused or read as opaque.
func byHand(raw string) string {
	at := strings.LastIndexByte(raw, '@')
	if at < 0 {
		// No user information; still drop a query, which may hold one.
		if q := strings.IndexByte(raw, '?'); q >= 0 {
			return raw[:q] + "?" + Mask
		}
		return raw
	}
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 && i < at {
		start = i + 3
	} else if i := strings.IndexByte(raw, ':'); i >= 0 && i < at {
		start = i + 1
	}
	user := raw[start:at]
	if i := strings.IndexAny(user, ":/?#"); i >= 0 {
		user = user[:i]
	}
	rest := raw[at:]
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		rest = rest[:q] + "?" + Mask
	}
	return raw[:start] + user + ":" + Mask + rest
}

// ParseError returns err, from url.Parse, without the raw URL that a
// *url.Error quotes and without the piece of it that the reason quotes
// (`invalid port ":Hunter2" after host` quotes part of a password): only
// what kind of thing was wrong.
func ParseError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return errors.New(strings.Join(strings.Fields(quoted.ReplaceAllString(err.Error(), "")), " "))
}

// quoted matches a quoted piece of an error text.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// DSNHint is what to add to the error of a URL that does not parse when it
// holds go-sql-driver's DSN address form, user:pass@tcp(host:port)/db,
// which url.Parse reads as a host with a bad port; "" otherwise.
func DSNHint(raw string) string {
	if !strings.Contains(raw, "@tcp(") {
		return ""
	}
	return " (a DSN's tcp(host:port) is host:port in a URL: mysql://user:pass@host:3306/db)"
}
