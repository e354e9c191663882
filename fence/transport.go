package fence

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/leasekit/lease"
)

// Transport is the holder's side of fencing over HTTP: an
// http.RoundTripper that tags every request with the lease held by the
// lease.Run whose context the request carries, so the server's Middleware
// can refuse it once a newer holder has written.
//
//	client := &http.Client{Transport: &fence.Transport{}}
//	err := lease.Run(ctx, locker, "report", time.Minute, func(ctx context.Context) error {
//		req, _ := http.NewRequestWithContext(ctx, "PUT", url, body)
//		resp, err := client.Do(req) // carries Lease-Name and Lease-Token
//		...
//		return fence.CheckResponse(resp) // ErrStale on a 409 from Middleware
//	})
//
// A request that already has a HeaderToken (see SetHeader) is sent as it
// is. A request with neither that header nor a lease in its context is not
// sent: RoundTrip fails with an error matching lease.ErrInvalid, since a
// guarded write without a token would be refused by the server anyway.
// The token is the one of the lease's latest renewal, which never changes
// within a tenure.
type Transport struct {
	// Base sends the tagged request; nil means http.DefaultTransport.
	Base http.RoundTripper
}

// RoundTrip adds HeaderName and HeaderToken to a clone of req and sends
// it with t.Base. It never changes req itself.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if req.Header.Get(HeaderToken) != "" {
		return base.RoundTrip(req)
	}
	l, ok := lease.FromContext(req.Context())
	if !ok {
		closeBody(req)
		return nil, fmt.Errorf("fence: %w: %s %s: the request's context carries no lease (make it with the ctx that lease.Run gives fn, or call fence.SetHeader)", lease.ErrInvalid, req.Method, req.URL.Redacted())
	}
	if err := Validate(l.Name, l.Token); err != nil {
		closeBody(req)
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set(HeaderName, EncodeName(l.Name))
	r.Header.Set(HeaderToken, strconv.FormatUint(l.Token, 10))
	return base.RoundTrip(r)
}

// closeBody closes a request body that will not be sent, as the
// RoundTripper contract asks even on errors.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
