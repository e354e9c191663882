package etcdlease

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strconv"

	"github.com/leasekit/lease"
)

// TLS by URL:
//
//	etcds://host:2379[,host:2379]?cacert=/path/ca.pem&cert=/path/client.pem&key=/path/client-key.pem
//
// etcds:// speaks TLS to every endpoint. cacert is the PEM file of the CAs
// that signed the servers' certificates (default: the system's); cert and
// key, given together, are the client certificate etcd's
// --client-cert-auth asks for; server_name overrides the name checked in
// the servers' certificates (default: each endpoint's host); skip_verify=true
// checks nothing (for tests only). The files are read when the URL is
// opened, and a file that cannot be read or parsed is an error that names
// it.

// tlsParams are the parameters of etcds:// URLs.
var tlsParams = []string{"cacert", "cert", "key", "server_name", "skip_verify"}

// tlsConfig builds the TLS configuration of an etcds:// URL's query.
func tlsConfig(q url.Values) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: q.Get("server_name")}
	if path := q.Get("cacert"); path != "" {
		pem, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: etcds URL: cacert: %v", lease.ErrInvalid, err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: etcds URL: cacert %s holds no PEM certificate", lease.ErrInvalid, path)
		}
	}
	cert, key := q.Get("cert"), q.Get("key")
	switch {
	case (cert == "") != (key == ""):
		return nil, fmt.Errorf("%w: etcds URL: cert and key go together (a client certificate and its private key)", lease.ErrInvalid)
	case cert != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%w: etcds URL: client certificate %s with key %s: %v", lease.ErrInvalid, cert, key, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	if v := q.Get("skip_verify"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%w: etcds URL: skip_verify=%q is not a boolean", lease.ErrInvalid, v)
		}
		c.InsecureSkipVerify = b
	}
	return c, nil
}

// hasAny reports whether u's query names any of keys.
func hasAny(u *url.URL, keys []string) bool {
	q := u.Query()
	for _, k := range keys {
		if q.Has(k) {
			return true
		}
	}
	return false
}
