package redisstore

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/usage"
)

// writeCerts writes a private CA and a server certificate it signed for
// 127.0.0.1 and localhost, as PEM files: ca.pem, cert.pem, key.pem.
func writeCerts(t *testing.T) (ca, cert, key string) {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", srvDER), write("key.pem", "EC PRIVATE KEY", keyDER)
}

// TestTLSWithAPrivateCA: rediss:// with --usage-store-ca-file counts over
// TLS; without the CA the server's certificate is refused, and plain
// redis:// to a TLS port does not connect: both ErrUnavailable at Open.
func TestTLSWithAPrivateCA(t *testing.T) {
	ca, cert, key := writeCerts(t)
	srv := redistest.Start(t, redistest.WithTLS(cert, key), redistest.WithPassword("tls-pw-5"))
	pw := passwordFile(t, "tls-pw-5\n")
	s := openConfig(t, Config{URL: "rediss://" + srv.Addr + "/2", CAFile: ca, PasswordFile: pw, Namespace: "agents", Timeout: 5 * time.Second})
	q := rate("Policy/p/r/rateLimit", 10, time.Hour)
	reserve(t, s, q)
	if r := reserve(t, s, q); r.Used[0] != 1 {
		t.Fatalf("over TLS: used %v, want 1", r.Used)
	}
	if err := s.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), Config{URL: "rediss://" + srv.Addr + "/2", PasswordFile: pw, Namespace: "agents", Timeout: 5 * time.Second})
	if !errors.Is(err, usage.ErrUnavailable) || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("TLS without the private CA: %v, want a certificate error", err)
	}
	_, err = Open(context.Background(), Config{URL: "redis://" + srv.Addr + "/2", PasswordFile: pw, Namespace: "agents"})
	if !errors.Is(err, usage.ErrUnavailable) {
		t.Errorf("plain redis:// to a TLS port: %v, want ErrUnavailable", err)
	}
	t.Logf("plain redis:// to the TLS port: %v", err)
}
