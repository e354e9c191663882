package testserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// redisError is an error reply from a Redis server.
type redisError string

func (e redisError) Error() string { return string(e) }

// redisDo sends one command to the Redis server (or sentinel) at addr on a
// new connection and returns its reply: a string, an int64, nil, a
// []any, or a redisError. It needs no client library, so the helpers
// work whatever client a test uses.
func redisDo(ctx context.Context, addr string, args ...string) (any, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(5 * time.Second)
	}
	_ = c.SetDeadline(deadline)
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	v, err := readReply(bufio.NewReader(c))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", addr, args[0], err)
	}
	if e, ok := v.(redisError); ok {
		return nil, fmt.Errorf("%s %s: %w", addr, strings.Join(args, " "), e)
	}
	return v, nil
}

// redisString runs a command whose reply is a string.
func redisString(ctx context.Context, addr string, args ...string) (string, error) {
	v, err := redisDo(ctx, addr, args...)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s %s: reply %v is not a string", addr, args[0], v)
	}
	return s, nil
}

// readReply reads one RESP2 reply.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return redisError(line[1:]), nil
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected reply %q", line)
}

// infoField returns a field of an INFO reply ("role", "master_link_status"),
// or "".
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// pairs turns a flat [field, value, ...] reply into a map.
func pairs(v any) map[string]string {
	m := map[string]string{}
	arr, _ := v.([]any)
	for i := 0; i+1 < len(arr); i += 2 {
		k, _ := arr[i].(string)
		val, _ := arr[i+1].(string)
		m[k] = val
	}
	return m
}

// pingRedis checks that a Redis server or sentinel answers PING.
func pingRedis(addr string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		s, err := redisString(ctx, addr, "PING")
		if err == nil && s != "PONG" {
			err = fmt.Errorf("PING answered %q", s)
		}
		return err
	}
}
