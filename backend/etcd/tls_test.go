package etcdlease

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/internal/testenv"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lease test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate and key signed by ca, in PEM, for a server
// at 127.0.0.1 or for a client.
func (ca *testCA) issue(t *testing.T, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "lease test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// write puts data in a file of t's temp dir and returns its path.
func write(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// tlsFront listens for TLS (HTTP/2, client certificates signed by ca
// required) and passes each connection on, decrypted, to the plain etcd
// endpoint behind: a real TLS handshake in front of the test server. It
// returns its address.
func tlsFront(t *testing.T, ca *testCA, behind string) string {
	t.Helper()
	certPEM, keyPEM := ca.issue(t, true)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2"},
		ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", behind)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, b)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(b, c); b.Close() })
			wg.Go(func() { _, _ = io.Copy(c, b); c.Close() })
		}
	})
	return ln.Addr().String()
}

// TestOpenTLS: an etcds:// URL with the CA and a client certificate
// reaches etcd through a TLS front that requires both; without the client
// certificate, or trusting another CA, Open fails, and never with
// ErrInvalid (the URL was fine, the handshake was not).
func TestOpenTLS(t *testing.T) {
	testenv.Slow(t)
	t.Parallel()
	ca := newCA(t)
	front := tlsFront(t, ca, strings.TrimPrefix(strings.TrimPrefix(testEndpoints[0], "http://"), "https://"))
	certPEM, keyPEM := ca.issue(t, false)
	cacert, cert, key := write(t, "ca.pem", ca.pem), write(t, "client.pem", certPEM), write(t, "client-key.pem", keyPEM)
	ctx := t.Context()

	raw := "etcds://" + front + "?cacert=" + cacert + "&cert=" + cert + "&key=" + key + "&prefix=" + randomPrefix()
	l, err := Open(ctx, raw)
	if err != nil {
		t.Fatalf("Open(%s): %v", raw, err)
	}
	held, err := l.Acquire(ctx, "tls", "a", 2*time.Second)
	if err == nil {
		err = l.Release(ctx, held)
	}
	l.Close()
	if err != nil {
		t.Fatalf("Acquire and Release over TLS: %v", err)
	}

	other := write(t, "other-ca.pem", newCA(t).pem)
	for _, bad := range []string{
		"etcds://" + front + "?cacert=" + cacert + "&dial_timeout=2s",
		"etcds://" + front + "?cacert=" + other + "&cert=" + cert + "&key=" + key + "&dial_timeout=2s",
	} {
		l, err := Open(ctx, bad)
		if err == nil {
			l.Close()
			t.Errorf("Open(%s) succeeded", bad)
			continue
		}
		if errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Open(%s) = %v: a failed handshake is not a bad URL", bad, err)
		}
	}
}

// TestTLSURLsRefused: etcds:// parameters that cannot work are refused
// with a message that names the problem.
func TestTLSURLsRefused(t *testing.T) {
	t.Parallel()
	ca := newCA(t)
	cacert := write(t, "ca.pem", ca.pem)
	for raw, want := range map[string]string{
		"etcd://127.0.0.1:2379?cacert=" + cacert:                              "use an etcds:// URL",
		"etcd://127.0.0.1:2379?tls=true":                                      "use an etcds:// URL",
		"etcd://u:Hunter2@127.0.0.1:2379?tls=1&skip_verify=true":              "use an etcds:// URL",
		"etcds://127.0.0.1:2379?cert=/c.pem":                                  "cert and key go together",
		"etcds://127.0.0.1:2379?cacert=/no/such/ca.pem":                       "/no/such/ca.pem",
		"etcds://127.0.0.1:2379?cacert=" + write(t, "empty.pem", []byte("x")): "no PEM certificate",
		"etcds://127.0.0.1:2379?cert=/no/c.pem&key=/no/k.pem":                 "/no/c.pem",
		"etcds://127.0.0.1:2379?skip_verify=perhaps":                          "skip_verify",
	} {
		_, err := Open(t.Context(), raw)
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s) = %v; want ErrInvalid saying %q", raw, err, want)
		}
		if _, err := lease.Open(t.Context(), raw); err == nil || strings.Contains(err.Error(), "Hunter2") {
			t.Errorf("lease.Open(%s) = %v; want an error without the password", raw, err)
		}
	}
}
