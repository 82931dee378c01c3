package snowflake

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
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The certificates of one test, made here with crypto/x509: a CA, a server certificate
// for 127.0.0.1 and a client certificate it signed, and another CA that signed nothing of
// these. Files in PEM, keys mode 0600 (the front refuses a key every user may read).
type testPKI struct {
	dir                   string
	ca, otherCA           string
	serverCert, serverKey string
	clientCert, clientKey string
	otherCert, otherKey   string // a client certificate of the other CA
}

type issuer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func writePEM(t *testing.T, file, kind string, der []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), mode); err != nil {
		t.Fatal(err)
	}
}

var serial int64

// sign makes a certificate from template, signed by parent (self-signed if nil), and
// writes it (and its key, if keyFile is set) under dir.
func sign(t *testing.T, template *x509.Certificate, parent *issuer, certFile, keyFile string) issuer {
	t.Helper()
	serial++
	template.SerialNumber = big.NewInt(serial)
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().Add(24 * time.Hour)
	key := newKey(t)
	signer := issuer{template, key}
	if parent != nil {
		signer = *parent
	}
	der, err := x509.CreateCertificate(rand.Reader, template, signer.cert, &key.PublicKey, signer.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, certFile, "CERTIFICATE", der, 0o644)
	if keyFile != "" {
		pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(t, keyFile, "PRIVATE KEY", pkcs8, 0o600)
	}
	return issuer{cert, key}
}

func makePKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	p := &testPKI{dir: dir}
	at := func(name string) string { return filepath.Join(dir, name) }
	p.ca, p.otherCA = at("ca.crt"), at("other-ca.crt")
	p.serverCert, p.serverKey = at("server.crt"), at("server.key")
	p.clientCert, p.clientKey = at("client.crt"), at("client.key")
	p.otherCert, p.otherKey = at("other-client.crt"), at("other-client.key")
	caTemplate := func(name string) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: name}, IsCA: true,
			BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	}
	ca := sign(t, caTemplate("snowflake test CA"), nil, p.ca, "")
	other := sign(t, caTemplate("another CA"), nil, p.otherCA, "")
	sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, &ca, p.serverCert, p.serverKey)
	client := func(parent *issuer, certFile, keyFile string) {
		sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: "orders"},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, parent, certFile, keyFile)
	}
	client(&ca, p.clientCert, p.clientKey)
	client(&other, p.otherCert, p.otherKey)
	return p
}

// startTLSFront starts a snowflaked whose HTTP front on 127.0.0.1 speaks TLS with p's
// server certificate (and, with mutual, asks for a client certificate of p's CA); it
// returns the daemon and its remote, "https://127.0.0.1:PORT".
func startTLSFront(t *testing.T, p *testPKI, mutual bool) (*daemon, string) {
	t.Helper()
	// A free port, released for the daemon to bind (another process could take it in
	// between; the daemon then fails to start and says so).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := l.Addr().String()
	l.Close()
	d := newDaemon(t)
	d.config = "[http]\nlisten = [\"" + address + "\"]\n" +
		"tls_cert_file = \"" + p.serverCert + "\"\ntls_key_file = \"" + p.serverKey + "\"\n"
	if mutual {
		d.config += "tls_client_ca_file = \"" + p.ca + "\"\n"
	}
	d.start()
	d.waitReady()
	// The front binds at start, before the ring serves; wait for it anyway, bounded.
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", address, time.Second)
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the front at %s does not accept connections: %v\n%s", address, err, d.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return d, "https://" + address
}

// The timeout of a client that must take through a TLS front, and of each of its remote
// attempts: its first take is a TCP and TLS handshake and a request, which the defaults
// (100 ms; 50 ms an attempt) do not always cover on a CI host running other suites beside
// (and under -race). Refusals fail at once, whatever it is.
const tlsTakeTimeout = 10 * time.Second

// A Client of a host without a daemon (an empty runtime directory), failing over to the
// remotes of opts.
func openWithoutDaemon(t *testing.T, opts ...Option) (*Client, error) {
	t.Helper()
	c, err := Open("orders", append([]Option{WithRuntimeDir(t.TempDir()),
		WithRemoteTimeouts(tlsTakeTimeout, tlsTakeTimeout)}, opts...)...)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func takeIncreasing(t *testing.T, c *Client, n int) []uint64 {
	t.Helper()
	ids := make([]uint64, 0, n)
	for len(ids) < n {
		batch := make([]uint64, n-len(ids))
		got, err := c.NextBatch(batch)
		if err != nil {
			t.Fatalf("after %d IDs: %v", len(ids), err)
		}
		ids = append(ids, batch[:got]...)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("IDs not increasing: %d after %d", ids[i], ids[i-1])
		}
	}
	return ids
}

// wantRemoteRefused checks a take that no remote answered: unavailable, its message naming
// the remote and each of the reasons.
func wantRemoteRefused(t *testing.T, c *Client, remote string, reasons ...string) {
	t.Helper()
	_, err := c.Next()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("got %v, want the remote refused (ErrUnavailable)", err)
	}
	message := err.Error()
	if !strings.Contains(message, "no remote gave one: "+remote+": ") {
		t.Fatalf("the error does not name the remote %s: %v", remote, err)
	}
	for _, reason := range reasons {
		if !strings.Contains(message, reason) {
			t.Fatalf("the error does not say %q: %v", reason, err)
		}
	}
	t.Logf("refused as it should be: %v", err)
}

func TestHTTPSRemoteServesAClientWithoutALocalDaemon(t *testing.T) {
	p := makePKI(t)
	d, remote := startTLSFront(t, p, false)
	c, err := openWithoutDaemon(t, WithRemotes(remote), WithRemotesCA(p.ca),
		WithTimeout(tlsTakeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	ids := takeIncreasing(t, c, 5000)
	// They are the remote daemon's IDs: its machine number, decoded near now.
	status, err := open(t, d).Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{ids[0], ids[len(ids)-1]} {
		fields, err := DecodeWithEpoch(id, time.UnixMilli(status.EpochUnixMs))
		if err != nil || fields.Machine != status.Machine || time.Since(fields.Time) > 10*time.Second {
			t.Fatalf("ID %d decodes to %+v; the remote is machine %d", id, fields, status.Machine)
		}
	}
	t.Logf("%d IDs over TLS from %s", len(ids), remote)
}

func TestHTTPSRemoteOfAnotherCAIsRefusedNamingTheRemoteAndWhy(t *testing.T) {
	p := makePKI(t)
	_, remote := startTLSFront(t, p, false)
	c, err := openWithoutDaemon(t, WithRemotes(remote), WithRemotesCA(p.otherCA))
	if err != nil {
		t.Fatal(err)
	}
	wantRemoteRefused(t, c, remote, "x509: certificate signed by unknown authority")
	// The host name is verified too: the certificate is for 127.0.0.1, not localhost.
	port := remote[strings.LastIndexByte(remote, ':')+1:]
	byName := "https://localhost:" + port
	c, err = openWithoutDaemon(t, WithRemotes(byName), WithRemotesCA(p.ca))
	if err != nil {
		t.Fatal(err)
	}
	wantRemoteRefused(t, c, byName, "x509: certificate is not valid for any names, but wanted to match localhost")
	// Without a CA file the system's roots are used, which do not hold the test CA.
	c, err = openWithoutDaemon(t, WithRemotes(remote))
	if err != nil {
		t.Fatal(err)
	}
	wantRemoteRefused(t, c, remote, "x509: certificate signed by unknown authority")
}

func TestHTTPSRemoteWithMutualTLSNeedsTheClientCertificate(t *testing.T) {
	p := makePKI(t)
	_, remote := startTLSFront(t, p, true)
	without, err := openWithoutDaemon(t, WithRemotes(remote), WithRemotesCA(p.ca))
	if err != nil {
		t.Fatal(err)
	}
	// The front fails the handshake: TLS 1.3 reports it on the first read.
	wantRemoteRefused(t, without, remote, "remote error: tls: certificate required")
	wrong, err := openWithoutDaemon(t, WithRemotes(remote), WithRemotesCA(p.ca),
		WithRemotesCert(p.otherCert, p.otherKey))
	if err != nil {
		t.Fatal(err)
	}
	// Go presents no certificate the front's CA did not sign (the request names the CAs).
	wantRemoteRefused(t, wrong, remote, "remote error: tls: certificate required")
	with, err := openWithoutDaemon(t, WithRemotes(remote), WithRemotesCA(p.ca),
		WithRemotesCert(p.clientCert, p.clientKey), WithTimeout(tlsTakeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	takeIncreasing(t, with, 100)
	// The same from the environment alone, as a service configured by its unit or pod.
	t.Setenv("SNOWFLAKE_REMOTES", "http://127.0.0.1:1, "+remote)
	t.Setenv("SNOWFLAKE_REMOTES_CA", p.ca)
	t.Setenv("SNOWFLAKE_REMOTES_CERT", p.clientCert)
	t.Setenv("SNOWFLAKE_REMOTES_KEY", p.clientKey)
	if _, err := openWithoutDaemon(t); err == nil ||
		!strings.Contains(err.Error(), `remote "http://127.0.0.1:1" is plain HTTP`) {
		t.Fatalf("a plain remote beside $SNOWFLAKE_REMOTES_CA: got %v, want it refused", err)
	}
	t.Setenv("SNOWFLAKE_REMOTES", remote)
	fromEnvironment, err := openWithoutDaemon(t, WithTimeout(tlsTakeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	takeIncreasing(t, fromEnvironment, 100)
	// The options win over the environment.
	t.Setenv("SNOWFLAKE_REMOTES_CA", p.otherCA)
	withOptions, err := openWithoutDaemon(t, WithRemotesCA(p.ca), WithTimeout(tlsTakeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	takeIncreasing(t, withOptions, 100)
}

// Open refuses every remote or TLS setting it could not honour, with the C++ client's
// sentences; none of these needs a daemon.
func TestOpenRefusesRemotesItCannotVerify(t *testing.T) {
	p := makePKI(t)
	missing := filepath.Join(p.dir, "missing.crt")
	notPEM := filepath.Join(p.dir, "not-pem.crt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, row := range []struct {
		name string
		opts []Option
		want string
	}{
		{"another scheme", []Option{WithRemotes("ftp://127.0.0.1:8443")},
			`remote "ftp://127.0.0.1:8443": expected host:port, http://host:port or https://host:port`},
		{"a path", []Option{WithRemotes("https://127.0.0.1:8443/v1")},
			`remote "https://127.0.0.1:8443/v1": expected host:port`},
		{"no address", []Option{WithRemotes("https://")}, `remote "https://": expected`},
		{"a plain remote beside a CA", []Option{WithRemotes("https://127.0.0.1:8443",
			"http://127.0.0.1:8080"), WithRemotesCA(p.ca)},
			`remote "http://127.0.0.1:8080" is plain HTTP, but a TLS CA file or client ` +
				`certificate for the remotes is set (WithRemotesCA/WithRemotesCert, or ` +
				`$SNOWFLAKE_REMOTES_CA/$SNOWFLAKE_REMOTES_CERT): write it as ` +
				`https://127.0.0.1:8080, or unset the TLS files`},
		{"a host:port remote beside a certificate", []Option{WithRemotes("127.0.0.1:8080"),
			WithRemotesCert(p.clientCert, p.clientKey)}, "write it as https://127.0.0.1:8080"},
		{"a certificate without its key", []Option{WithRemotes("https://127.0.0.1:8443"),
			WithRemotesCert(p.clientCert, "")}, "a client certificate for https:// remotes " +
			"needs its key, and a key its certificate"},
		{"a key without its certificate", []Option{WithRemotes("https://127.0.0.1:8443"),
			WithRemotesCert("", p.clientKey)}, "both or neither"},
		{"a CA file that cannot be read", []Option{WithRemotes("https://127.0.0.1:8443"),
			WithRemotesCA(missing)}, "the remotes' TLS CA file " + missing +
			" cannot be read: no such file or directory"},
		{"a key that cannot be read", []Option{WithRemotes("https://127.0.0.1:8443"),
			WithRemotesCert(p.clientCert, missing)}, "the remotes' TLS client key " + missing +
			" cannot be read"},
		{"a CA file without a certificate", []Option{WithRemotes("https://127.0.0.1:8443"),
			WithRemotesCA(notPEM)}, "the remotes' TLS CA file " + notPEM + " holds no PEM certificate"},
		{"a key of another certificate", []Option{WithRemotes("https://127.0.0.1:8443"),
			WithRemotesCert(p.clientCert, p.otherKey)}, "the remotes' TLS client certificate " +
			p.clientCert + " and key " + p.otherKey + " do not load"},
	} {
		t.Run(strings.ReplaceAll(row.name, " ", "_"), func(t *testing.T) {
			_, err := openWithoutDaemon(t, row.opts...)
			e := wantError(t, err, ErrInvalidArgument, statusInvalidArgument, "invalid_argument")
			if !strings.Contains(e.Message, row.want) {
				t.Fatalf("got %q, want it to say %q", e.Message, row.want)
			}
		})
	}
	// A key without a certificate from the environment is refused the same way.
	t.Setenv("SNOWFLAKE_REMOTES_KEY", p.clientKey)
	_, err := openWithoutDaemon(t, WithRemotes("https://127.0.0.1:8443"))
	if e := wantError(t, err, ErrInvalidArgument, statusInvalidArgument, "invalid_argument"); !strings.Contains(e.Message, "both or neither") {
		t.Fatalf("got %q", e.Message)
	}
	// Without remotes the TLS settings are not looked at, as in the C++ client.
	if _, err := openWithoutDaemon(t, WithRemotes()); !errors.Is(err, ErrDaemonNotRunning) {
		t.Fatalf("no remotes, no daemon: got %v", err)
	}
}

// replaceFile puts from's content at to as cert-manager and certbot do: a new file
// renamed over the old one.
func replaceFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to+".new", data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(to+".new", to); err != nil {
		t.Fatal(err)
	}
}

// takeWithin takes until a take succeeds, failing the test after 10 s (the files are
// looked at every second, and a refused remote is skipped for up to 2 s).
func takeWithin(t *testing.T, c *Client, what string) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if _, err = c.Next(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: no ID within 10 s: %v", what, err)
}

// The TLS files are looked at again while the Client lives: a replaced CA file and client
// certificate are used for new connections, without a new Client; a certificate that does
// not match its key (the key not yet replaced) is not taken, and the error says so.
func TestHTTPSRemoteTakesRotatedTLSFilesWithoutANewClient(t *testing.T) {
	p := makePKI(t)
	_, remote := startTLSFront(t, p, true)
	dir := t.TempDir()
	ca, cert, key := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"),
		filepath.Join(dir, "tls.key")
	replaceFile(t, p.otherCA, ca, 0o644)
	replaceFile(t, p.otherCert, cert, 0o644)
	replaceFile(t, p.otherKey, key, 0o600)
	c, err := openWithoutDaemon(t, WithRemotes(remote), WithRemotesCA(ca), WithRemotesCert(cert, key))
	if err != nil {
		t.Fatal(err)
	}
	wantRemoteRefused(t, c, remote, "x509: certificate signed by unknown authority")
	// The CA file now names the front's CA: the front is verified, and refuses a client
	// certificate of another CA.
	replaceFile(t, p.ca, ca, 0o644)
	time.Sleep(tlsCheckEvery + 100*time.Millisecond)
	wantRemoteRefused(t, c, remote, "remote error: tls: certificate required")
	// The certificate first: it does not match the old key, so the old pair stays.
	replaceFile(t, p.clientCert, cert, 0o644)
	time.Sleep(tlsCheckEvery + 100*time.Millisecond)
	wantRemoteRefused(t, c, remote, "remote error: tls: certificate required",
		"(changed TLS files not used: the remotes' TLS client certificate "+cert+" and key "+
			key+" do not load")
	replaceFile(t, p.clientKey, key, 0o600)
	takeWithin(t, c, "after the rotation")
}

// An https:// remote must speak TLS 1.2 or later, and its redirects are never followed
// (one to plain HTTP would bypass the verification). Fronts of Go's httptest, with its
// certificate for 127.0.0.1 as the CA file.
func TestHTTPSRemoteBelowTLS12OrRedirectingIsRefused(t *testing.T) {
	plain := httptest.NewServer(&fakeFront{replies: []func(int) string{idsAt(DefaultEpoch, 0, 0)}})
	defer plain.Close()
	for _, row := range []struct {
		name    string
		handler http.Handler
		max     uint16
		want    string
	}{
		{"TLS 1.1", &fakeFront{replies: []func(int) string{idsAt(DefaultEpoch, 0, 0)}},
			tls.VersionTLS11, "protocol version"},
		{"a redirect to plain HTTP", http.RedirectHandler(plain.URL+"/v1/ids?service=orders&count=1",
			http.StatusFound), tls.VersionTLS13, "HTTP 302"},
	} {
		t.Run(strings.ReplaceAll(row.name, " ", "_"), func(t *testing.T) {
			front := httptest.NewUnstartedServer(row.handler)
			front.TLS = &tls.Config{MaxVersion: row.max}
			front.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
			front.StartTLS()
			defer front.Close()
			ca := filepath.Join(t.TempDir(), "ca.crt")
			writePEM(t, ca, "CERTIFICATE", front.Certificate().Raw, 0o644)
			c, err := openWithoutDaemon(t, WithRemotes(front.URL), WithRemotesCA(ca))
			if err != nil {
				t.Fatal(err)
			}
			wantRemoteRefused(t, c, front.URL, row.want)
		})
	}
}
