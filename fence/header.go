package fence

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// The HTTP headers that carry a write's fence. A client sets both on
// every guarded request (Transport does it from lease.FromContext, or call
// SetHeader); Middleware reads them.
//
// HeaderName holds the lease name, percent-encoded so that any name fits
// in a header value: the bytes A-Z a-z 0-9 - . _ ~ : / @ are sent as
// themselves, every other byte of the name's UTF-8 (space, '%', control
// characters such as NUL, CR and LF, and every byte of a non-ASCII
// character) as '%' and two upper-case hex digits. So "reports/daily"
// is sent as it is and "a b\x00" as "a%20b%00". Decoding takes either case
// of hex digit and any other visible ASCII character (0x21-0x7E except
// '%') as itself; it refuses raw spaces, tabs and non-ASCII bytes, a '%'
// without two hex digits, and a result that is not a valid lease name.
//
// HeaderToken holds the token in decimal: 1 to MaxToken, no sign, no
// leading zeros.
//
// HeaderMax is set on a 409 Conflict answer from Middleware: the larger
// token that beat the request's, in decimal.
const (
	HeaderName  = "Lease-Name"
	HeaderToken = "Lease-Token"
	HeaderMax   = "Lease-Token-Max"
)

// SetHeader sets HeaderName and HeaderToken on h for a write tagged
// (name, token), replacing any earlier values. Use it for requests made
// outside lease.Run, for instance with the LEASE_NAME and LEASE_TOKEN that
// the lease command passes. The error matches lease.ErrInvalid when name
// or token could not be accepted by any checker (see Validate).
func SetHeader(h http.Header, name string, token uint64) error {
	if err := Validate(name, token); err != nil {
		return err
	}
	h.Set(HeaderName, EncodeName(name))
	h.Set(HeaderToken, strconv.FormatUint(token, 10))
	return nil
}

// ParseHeader returns the name and token carried by h. The error matches
// lease.ErrInvalid and says what is wrong: a header missing or repeated, a
// name that does not decode to a valid lease name, a token that is not a
// decimal between 1 and MaxToken.
func ParseHeader(h http.Header) (name string, token uint64, err error) {
	rawName, err := single(h, HeaderName)
	if err != nil {
		return "", 0, err
	}
	rawToken, err := single(h, HeaderToken)
	if err != nil {
		return "", 0, err
	}
	if name, err = DecodeName(rawName); err != nil {
		return "", 0, err
	}
	if token, err = parseToken(rawToken); err != nil {
		return "", 0, fmt.Errorf("%w (lease %q)", err, name)
	}
	return name, token, nil
}

// single returns the one value of header key in h.
func single(h http.Header, key string) (string, error) {
	vs := h.Values(key)
	switch len(vs) {
	case 0:
		return "", fmt.Errorf("fence: %w: no %s header: a guarded request must carry %s and %s", lease.ErrInvalid, key, HeaderName, HeaderToken)
	case 1:
		return strings.TrimSpace(vs[0]), nil
	}
	return "", fmt.Errorf("fence: %w: %d %s headers: send exactly one", lease.ErrInvalid, len(vs), key)
}

// parseToken parses a HeaderToken value.
func parseToken(s string) (uint64, error) {
	bad := func(why string) (uint64, error) {
		return 0, fmt.Errorf("fence: %w: %s %q %s", lease.ErrInvalid, HeaderToken, s, why)
	}
	if s == "" {
		return bad("is empty")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return bad("is not a decimal number")
		}
	}
	if s[0] == '0' {
		return bad("is zero or has a leading zero")
	}
	t, err := strconv.ParseUint(s, 10, 64)
	if err != nil || t > MaxToken {
		return bad(fmt.Sprintf("is larger than the maximum of %d", uint64(MaxToken)))
	}
	return t, nil
}

// plain reports whether EncodeName sends byte c as itself.
func plain(c byte) bool {
	switch {
	case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~:/@", c) >= 0
}

// EncodeName returns name as it is sent in HeaderName: percent-encoded,
// every byte except A-Z a-z 0-9 - . _ ~ : / @ as %XX.
func EncodeName(name string) string {
	n := 0
	for i := 0; i < len(name); i++ {
		if !plain(name[i]) {
			n++
		}
	}
	if n == 0 {
		return name
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(name)+2*n)
	for i := 0; i < len(name); i++ {
		c := name[i]
		if plain(c) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	return string(b)
}

// DecodeName returns the lease name encoded in a HeaderName value (see
// HeaderName for the format). The error matches lease.ErrInvalid.
func DecodeName(s string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("fence: %w: %s %q %s", lease.ErrInvalid, HeaderName, abbrev(s), why)
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) {
				return bad(fmt.Sprintf("has a '%%' at byte %d without two hex digits after it", i))
			}
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				return bad(fmt.Sprintf("has a '%%' at byte %d without two hex digits after it", i))
			}
			b = append(b, hi<<4|lo)
			i += 2
		case c > 0x20 && c < 0x7f:
			b = append(b, c)
		default:
			return bad(fmt.Sprintf("has the byte %#02x at byte %d: percent-encode it", c, i))
		}
	}
	name := string(b)
	if !utf8.ValidString(name) {
		return bad("does not decode to valid UTF-8")
	}
	if err := driver.CheckName(name); err != nil {
		return "", fmt.Errorf("fence: %s header: %w", HeaderName, err)
	}
	return name, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// abbrev shortens a long header value for an error message.
func abbrev(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:60] + "..." + s[len(s)-10:]
}
