package fence

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/leasekit/lease"
)

type requestKey struct{}

type accepted struct {
	name  string
	token uint64
}

// Middleware is the resource's side of fencing over HTTP: it checks the
// HeaderName and HeaderToken of every request against c before passing it
// to next.
//
//   - Accepted (c.Check returned nil, raising the name's maximum): the
//     request goes to next, whose context carries the name and token
//     (FromContext).
//   - Stale: 409 Conflict, with HeaderMax set to the larger token that beat
//     the request's and a text body saying so; next is not called.
//   - Headers missing, repeated or malformed, or a token c finds invalid:
//     400 Bad Request with a text body naming the problem.
//   - c failed (its store is down, the request was cancelled): 503 Service
//     Unavailable with a short body that does not reveal the error; wrap c
//     in a CheckerFunc to log it.
//
// What Middleware cannot do is make the check atomic with next's write: it
// checks and raises, then next writes. A stale request that passes the
// check a moment before a newer holder's request can still have its write
// land after the newer one's. If next writes to the store that c keeps its
// fence in, make the write itself guarded there, with the name and token
// from FromContext: sqlfence's Guard or Tx in the write's transaction,
// redisfence's Do, etcdfence's Do. The second check costs one statement
// and closes the gap; Middleware still turns stale and malformed requests
// away before next reads their bodies. If next writes somewhere c's store
// does not reach, Middleware narrows the gap to the time between the check
// and the write but cannot close it.
func Middleware(c Checker, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, token, err := ParseHeader(r.Header)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		err = c.Check(r.Context(), name, token)
		var stale *StaleError
		switch {
		case err == nil:
			ctx := context.WithValue(r.Context(), requestKey{}, accepted{name, token})
			next.ServeHTTP(w, r.WithContext(ctx))
		case errors.As(err, &stale):
			WriteStale(w, stale)
		case errors.Is(err, lease.ErrInvalid):
			http.Error(w, err.Error(), http.StatusBadRequest)
		default:
			http.Error(w, fmt.Sprintf("fence: the token of lease %q could not be checked; try again", name), http.StatusServiceUnavailable)
		}
	})
}

// FromContext returns the lease name and token of the request whose
// context ctx is, once Middleware has accepted them.
func FromContext(ctx context.Context) (name string, token uint64, ok bool) {
	a, ok := ctx.Value(requestKey{}).(accepted)
	return a.name, a.token, ok
}

// WriteStale answers a refused write as Middleware does: 409 Conflict,
// HeaderMax set to e.Max, and a text body from e. A handler that makes its
// own guarded write (see Middleware) answers its ErrStale with it.
func WriteStale(w http.ResponseWriter, e *StaleError) {
	w.Header().Set(HeaderMax, strconv.FormatUint(e.Max, 10))
	http.Error(w, e.Error(), http.StatusConflict)
}

// CheckResponse returns a *StaleError (matching ErrStale) when resp is
// Middleware's or WriteStale's answer to a stale write: 409 Conflict with
// HeaderMax. It returns nil for any other response, which the caller
// handles as usual. It reads the name and token from resp.Request's
// headers, as Transport or SetHeader set them.
func CheckResponse(resp *http.Response) error {
	if resp == nil || resp.StatusCode != http.StatusConflict {
		return nil
	}
	max, err := parseToken(resp.Header.Get(HeaderMax))
	if err != nil {
		return nil
	}
	e := &StaleError{Max: max}
	if resp.Request != nil {
		if raw := resp.Request.Header.Get(HeaderName); raw != "" {
			e.Name, _ = DecodeName(raw)
		}
		if raw := resp.Request.Header.Get(HeaderToken); raw != "" {
			e.Token, _ = parseToken(raw)
		}
	}
	return e
}
