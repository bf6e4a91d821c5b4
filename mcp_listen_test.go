package computerfs

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/computerfs/computerfs/internal/testmount"
)

// TestMCPListenAddresses: `computerfs mcp --listen` serves plain HTTP only
// where other hosts cannot connect. An address that other hosts reach
// (every interface, an unspecified address, a non-loopback one) needs TLS
// or an explicit --insecure-http, and is refused at once, with exit 2 and
// the way out, before anything listens.
func TestMCPListenAddresses(t *testing.T) {
	m := testmount.Start(t, filepath.Join(t.TempDir(), "ws"))
	bin := testmount.Binary(t)
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0", "192.0.2.7:0"} {
		cmd := exec.Command(bin, "mcp", "-w", m.Dir, "--listen", addr)
		cmd.Env = append(os.Environ(), "COMPUTERFS_MCP_TOKEN=t")
		out, err := runWithin(t, cmd, time.Minute)
		if code := exitCodeOf(err); code != 2 || !strings.Contains(out, "plain HTTP") || !strings.Contains(out, "--tls-cert") {
			t.Errorf("--listen %s: exit %d, want 2 and a refusal:\n%s", addr, code, out)
		}
	}
	for _, args := range [][]string{{"--tls-cert", "x"}, {"--listen", "127.0.0.1:0", "--tls-key", "y"}, {"--insecure-http"}} {
		out, err := runWithin(t, exec.Command(bin, append([]string{"mcp", "-w", m.Dir}, args...)...), time.Minute)
		if code := exitCodeOf(err); code != 2 {
			t.Errorf("%v: exit %d, want 2:\n%s", args, code, out)
		}
	}
	// Every interface, said out loud: it serves, with a warning.
	url, warn := startMCP(t, bin, m.Dir, nil, "--listen", ":0", "--insecure-http")
	if !strings.Contains(warn, "warning: plain HTTP") || !strings.HasPrefix(url, "http://") {
		t.Errorf("--insecure-http: %s\n%s", url, warn)
	}
}

// TestMCPListenTLS: with --tls-cert and --tls-key the server speaks HTTPS
// on any address, and an MCP client that trusts the certificate uses the
// tools through it.
func TestMCPListenTLS(t *testing.T) {
	m := mountWithSpec(t, toolsSpec)
	bin := testmount.Binary(t)
	dir := t.TempDir()
	pool := writeSelfSigned(t, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	url, _ := startMCP(t, bin, m.Dir, []string{"COMPUTERFS_MCP_TOKEN=tls-token"},
		"--listen", ":0", "--tls-cert", filepath.Join(dir, "cert.pem"), "--tls-key", filepath.Join(dir, "key.pem"))
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("served on %s", url)
	}
	url = strings.Replace(url, "[::]", "127.0.0.1", 1)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}
	hc := &http.Client{Transport: bearerOver{"tls-token", tr}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ls", Arguments: map[string]any{"path": "/workspace"}})
	if err != nil || res.IsError {
		t.Fatalf("ls over HTTPS: %v %+v", err, res)
	}
	// Plain HTTP to the TLS port gets nothing.
	if resp, err := http.Post(strings.Replace(url, "https://", "http://", 1), "application/json", strings.NewReader("{}")); err == nil {
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP was answered on the TLS port")
		}
		resp.Body.Close()
	}
}

type bearerOver struct {
	token string
	rt    http.RoundTripper
}

func (b bearerOver) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// startMCP starts `computerfs mcp` with args and returns the address it
// says it serves and what it printed before that.
func startMCP(t *testing.T, bin, mnt string, env []string, args ...string) (url, said string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"mcp", "-w", mnt}, args...)...)
	cmd.Env = append(append(os.Environ(), "COMPUTERFS_MCP_TOKEN=t"), env...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	var b strings.Builder
	for url == "" && sc.Scan() {
		b.WriteString(sc.Text() + "\n")
		if m := regexp.MustCompile(`on (https?://\S+/mcp)`).FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		t.Fatalf("computerfs mcp %v did not say where it listens:\n%s", args, b.String())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return url, b.String()
}

// runWithin runs cmd and fails the test if it is still running after d.
func runWithin(t *testing.T, cmd *exec.Cmd, d time.Duration) (string, error) {
	t.Helper()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v still running after %v:\n%s", cmd.Args, d, out.String())
		return "", nil
	}
}

func exitCodeOf(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// writeSelfSigned writes a certificate for localhost and 127.0.0.1 and its
// key, and returns a pool that trusts it.
func writeSelfSigned(t *testing.T, certFile, keyFile string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return pool
}
