package etcdlease

import (
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"testing"
)

// TestTLSURLConfig: an etcds:// URL's parameters become the client's
// tls.Config (the CA pool, the client certificate, the server name,
// skip_verify), with TLS 1.2 at least; an etcd:// URL has none.
func TestTLSURLConfig(t *testing.T) {
	t.Parallel()
	ca := newCA(t)
	certPEM, keyPEM := ca.issue(t, false)
	cacert, cert, key := write(t, "ca.pem", ca.pem), write(t, "client.pem", certPEM), write(t, "client-key.pem", keyPEM)
	q := url.Values{"cacert": {cacert}, "cert": {cert}, "key": {key}, "server_name": {"etcd.internal"}, "prefix": {"jobs/"}}
	u := &url.URL{Scheme: "etcds", Host: "10.0.0.1:2379,10.0.0.2:2379", RawQuery: q.Encode()}
	cfg, opts, err := config(u)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.TLS
	if c == nil || c.RootCAs == nil || len(c.Certificates) != 1 || c.ServerName != "etcd.internal" || c.InsecureSkipVerify || c.MinVersion != tls.VersionTLS12 {
		t.Fatalf("etcds:// TLS config = %+v", c)
	}
	if !c.RootCAs.Equal(poolOf(t, ca)) {
		t.Error("the CA pool is not the cacert file's")
	}
	if len(cfg.Endpoints) != 2 || len(opts) != 1 {
		t.Errorf("endpoints %v, %d options", cfg.Endpoints, len(opts))
	}

	u = &url.URL{Scheme: "etcds", Host: "10.0.0.1:2379", RawQuery: "skip_verify=true"}
	if cfg, _, err = config(u); err != nil {
		t.Fatal(err)
	}
	if cfg.TLS == nil || !cfg.TLS.InsecureSkipVerify || cfg.TLS.RootCAs != nil || len(cfg.TLS.Certificates) != 0 {
		t.Errorf("etcds://?skip_verify=true: TLS config = %+v", cfg.TLS)
	}
	u = &url.URL{Scheme: "etcds", Host: "10.0.0.1:2379"}
	if cfg, _, err = config(u); err != nil || cfg.TLS == nil || cfg.TLS.RootCAs != nil {
		t.Errorf("etcds:// without parameters: %+v, %v; want TLS checked against the system's CAs", cfg.TLS, err)
	}
	u = &url.URL{Scheme: "etcd", Host: "10.0.0.1:2379"}
	if cfg, _, err = config(u); err != nil || cfg.TLS != nil {
		t.Errorf("etcd://: TLS config %+v, %v; want none", cfg.TLS, err)
	}
}

// poolOf is a pool of ca's certificate alone.
func poolOf(t *testing.T, ca *testCA) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}
