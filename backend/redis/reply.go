package redislease

import (
	"fmt"
	"strconv"
	"time"

	"github.com/leasekit/lease/driver"
)

// reply is the array a script returns: integers and bulk strings.
type reply []interface{}

func asReply(v interface{}, minLen int) (reply, error) {
	r, ok := v.([]interface{})
	if !ok || len(r) < minLen {
		return nil, fmt.Errorf("unexpected script reply %#v", v)
	}
	return reply(r), nil
}

// str returns element i as a string; integers are formatted in decimal.
func (r reply) str(i int) (string, error) {
	switch v := r[i].(type) {
	case string:
		return v, nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	}
	return "", fmt.Errorf("unexpected element %d of script reply: %#v", i, r[i])
}

// int returns element i as an integer.
func (r reply) int(i int) (int64, error) {
	if n, ok := r[i].(int64); ok {
		return n, nil
	}
	s, err := r.str(i)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("element %d of script reply: %w", i, err)
	}
	return n, nil
}

// token returns element i as a fencing token: a positive decimal integer.
func (r reply) token(i int) (uint64, error) {
	if n, ok := r[i].(int64); ok && n > 0 {
		return uint64(n), nil
	}
	s, err := r.str(i)
	if err != nil {
		return 0, err
	}
	t, err := strconv.ParseUint(s, 10, 64)
	if err != nil || t == 0 {
		return 0, fmt.Errorf("script reply holds token %q, not a positive integer", s)
	}
	return t, nil
}

// time returns elements i and i+1, the seconds and microseconds of the
// server's TIME, as a time.Time.
func (r reply) time(i int) (time.Time, error) {
	sec, err := r.int(i)
	if err != nil {
		return time.Time{}, err
	}
	usec, err := r.int(i + 1)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(sec, usec*1000), nil
}

// acquired returns element i, a tenure's start as the server's TIME in
// microseconds, or the zero time when the reply has no element i or it is
// empty: a hash written before the field existed (or a reply from an
// older script) has no start recorded.
func (r reply) acquired(i int) (time.Time, error) {
	if i >= len(r) {
		return time.Time{}, nil
	}
	s, err := r.str(i)
	if err != nil || s == "" {
		return time.Time{}, err
	}
	us, err := strconv.ParseInt(s, 10, 64)
	if err != nil || us <= 0 {
		return time.Time{}, fmt.Errorf("script reply holds tenure start %q, not a positive integer", s)
	}
	return time.UnixMicro(us), nil
}

// remaining returns element i, a PTTL in milliseconds, as a duration. A
// lease key without expiry (PTTL -1) was written by something other than
// this package: it is reported as an error rather than as a tenure.
func (r reply) remaining(i int) (time.Duration, error) {
	ms, err := r.int(i)
	if err != nil {
		return 0, err
	}
	switch {
	case ms < 0:
		return 0, fmt.Errorf("lease key has no expiry (PTTL %d): it was not written by this package", ms)
	case ms == 0:
		// Redis keeps a key until its expiry time has passed: with less
		// than a millisecond left PTTL says 0, but the tenure still holds.
		return time.Millisecond, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// tenure parses the {1, name, owner, token, pttl, time_s, time_us,
// acquired_us} reply of inspect.lua and force_release.lua.
func (r reply) tenure() (driver.Tenure, error) {
	name, err := r.str(1)
	if err != nil {
		return driver.Tenure{}, err
	}
	owner, err := r.str(2)
	if err != nil {
		return driver.Tenure{}, err
	}
	token, err := r.token(3)
	if err != nil {
		return driver.Tenure{}, err
	}
	left, err := r.remaining(4)
	if err != nil {
		return driver.Tenure{}, err
	}
	now, err := r.time(5)
	if err != nil {
		return driver.Tenure{}, err
	}
	acquired, err := r.acquired(7)
	if err != nil {
		return driver.Tenure{}, err
	}
	return driver.Tenure{Name: name, Owner: owner, Token: token, Expires: now.Add(left), Acquired: acquired, Remaining: left}, nil
}
