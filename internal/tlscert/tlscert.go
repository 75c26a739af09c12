// Package tlscert loads a configured certificate or generates a self-signed
// one into a directory for development: the API port's TLS (server.tls) and
// the Kubernetes-style API share it.
package tlscert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// File names of a generated certificate and its key inside their directory.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// Load reads a PEM certificate (chain) and key.
func Load(certPath, keyPath string) (tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("loading the TLS certificate %s and key %s: %w", certPath, keyPath, err)
	}
	return cert, nil
}

// Ensure returns the certificate in dir (CertFile, KeyFile) and its PEM,
// generating a self-signed one when there is none yet: valid for ten
// years for localhost, the loopback addresses and hosts, usable as its own
// CA (clients trust it by trusting the file). name is its common name.
func Ensure(dir, name string, hosts ...string) (tls.Certificate, []byte, error) {
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	if certPEM, err := os.ReadFile(certPath); err == nil {
		keyPEM, err := os.ReadFile(keyPath)
		if err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("the key of %s: %w", certPath, err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("the certificate in %s: %w (delete both files to generate new ones)", dir, err)
		}
		return cert, certPEM, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return tls.Certificate{}, nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM, keyPEM, err := generate(name, hosts)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	if err := writePrivate(keyPath, keyPEM); err != nil {
		return tls.Certificate{}, nil, err
	}
	if err := writePrivate(certPath, certPEM); err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, certPEM, err
}

func generate(name string, hosts []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !ip.IsUnspecified() {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			}
		} else if h != "" && h != "localhost" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// writePrivate writes data to path (mode 0600) through a temporary file,
// so a reader never sees half of it.
func writePrivate(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
