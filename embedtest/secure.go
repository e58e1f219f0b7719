package embedtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/leasegate/leasegate/coordinator"
)

// Secured clusters: members that serve clients and peers over TLS with
// certificates made for the test, and etcd authentication with a root user.

// RootUser is the user a cluster started WithAuth creates, with etcd's root
// role; the cluster's own clients (Client, NewClient) log in as it.
const RootUser = "root"

// bcryptMinCost is golang.org/x/crypto/bcrypt's MinCost, the lowest etcd
// accepts.
const bcryptMinCost = 4

// secureConfig is what WithTLS and WithAuth ask for.
type secureConfig struct {
	tls          bool
	rootPassword string // auth is on when it is set
}

// WithTLS makes every member serve clients and peers over TLS only, and
// require a client certificate from both: a CA, a member certificate (for
// 127.0.0.1 and localhost, used for serving and for dialing peers) and a
// client certificate are generated into the cluster's directory at start.
// TLSFiles names them; the cluster's own clients use them.
func WithTLS() Option {
	return func(c *config) error {
		c.secure.tls = true
		return nil
	}
}

// WithAuth turns etcd's authentication on once the members are ready: it
// creates RootUser with rootPassword and etcd's root role, then enables
// auth through the client API, as an operator would with etcdctl. The
// cluster's own clients log in as root; ClientAs logs in as another user.
func WithAuth(rootPassword string) Option {
	return func(c *config) error {
		if rootPassword == "" {
			return errors.New("embedtest: WithAuth needs a root password")
		}
		c.secure.rootPassword = rootPassword
		return nil
	}
}

// TLSFiles are the PEM files of a cluster started WithTLS: what etcdctl's
// and leasegate's --cacert, --cert and --key take.
type TLSFiles struct {
	CA         string // the CA that signed every certificate below
	CAKey      string // its key, for a test that issues certificates of its own (an expired one, say)
	MemberCert string // the members' certificate (server and peer)
	MemberKey  string
	ClientCert string // a client certificate (CN leasegate-embedtest-client, not a user name)
	ClientKey  string
}

// TLSFiles names the cluster's certificate files; nil without WithTLS.
func (c *Cluster) TLSFiles() *TLSFiles { return c.certs }

// RootPassword is RootUser's password; "" without WithAuth.
func (c *Cluster) RootPassword() string { return c.cfg.secure.rootPassword }

// scheme is the URL scheme of the members' client and peer URLs.
func (s secureConfig) scheme() string {
	if s.tls {
		return "https"
	}
	return "http"
}

// prepare makes the certificates under dir, if TLS was asked for.
func (s secureConfig) prepare(dir string) (*TLSFiles, error) {
	if !s.tls {
		return nil, nil
	}
	certs, err := makeCerts(filepath.Join(dir, "tls"))
	if err != nil {
		return nil, fmt.Errorf("embedtest: certificates: %w", err)
	}
	return certs, nil
}

// applySecurity configures a member's TLS and its password hashing cost.
func (m *Member) applySecurity(ec *embed.Config) {
	if m.certs != nil {
		info := transport.TLSInfo{CertFile: m.certs.MemberCert, KeyFile: m.certs.MemberKey,
			TrustedCAFile: m.certs.CA, ClientCertAuth: true}
		ec.ClientTLSInfo, ec.PeerTLSInfo = info, info
	}
	if m.auth {
		// Each login checks a bcrypt hash: the cheapest cost keeps tests
		// fast; it is no protection, and needs none on loopback.
		ec.BcryptCost = bcryptMinCost
	}
}

// clientConfig is the configuration of a client of every member, as user
// (no credentials when user is "").
func (c *Cluster) clientConfig(user, password string, opts []grpc.DialOption) (clientv3.Config, error) {
	cfg := clientv3.Config{
		Endpoints:   c.Endpoints(),
		DialTimeout: 5 * time.Second,
		DialOptions: append(coordinator.DialOptions(), opts...),
		Logger:      zap.NewNop(),
		Username:    user,
		Password:    password,
	}
	if c.certs != nil {
		tlsCfg, err := transport.TLSInfo{CertFile: c.certs.ClientCert, KeyFile: c.certs.ClientKey,
			TrustedCAFile: c.certs.CA}.ClientConfig()
		if err != nil {
			return clientv3.Config{}, fmt.Errorf("embedtest: client TLS: %w", err)
		}
		cfg.TLS = tlsCfg
	}
	return cfg, nil
}

// NewClientAs returns a client of every member that logs in as user (no
// credentials when user is ""); the caller closes it.
func (c *Cluster) NewClientAs(user, password string, opts ...grpc.DialOption) (*clientv3.Client, error) {
	cfg, err := c.clientConfig(user, password, opts)
	if err != nil {
		return nil, err
	}
	return clientv3.New(cfg)
}

// ClientAs is NewClientAs for a test: the client is closed at its end.
func (c *Cluster) ClientAs(t testing.TB, user, password string) *clientv3.Client {
	t.Helper()
	cli, err := c.NewClientAs(user, password)
	if err != nil {
		t.Fatalf("embedtest: client as %q: %v", user, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// rootCredentials are what the cluster's own clients log in with.
func (c *Cluster) rootCredentials() (string, string) {
	if c.cfg.secure.rootPassword == "" {
		return "", ""
	}
	return RootUser, c.cfg.secure.rootPassword
}

// enableAuth creates the root user and turns authentication on, if asked.
func (c *Cluster) enableAuth() error {
	pw := c.cfg.secure.rootPassword
	if pw == "" {
		return nil
	}
	cli, err := c.NewClientAs("", "")
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if _, err := cli.UserAdd(ctx, RootUser, pw); err != nil {
		return fmt.Errorf("embedtest: user add root: %w", err)
	}
	if _, err := cli.UserGrantRole(ctx, RootUser, "root"); err != nil {
		return fmt.Errorf("embedtest: user grant-role root root: %w", err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("embedtest: auth enable: %w", err)
	}
	return nil
}

// AddPrefixUser creates user with a role of its own (named user+"-role")
// granted readwrite on every key under prefix and nothing else — what
// docs/operations.md tells an operator to run with etcdctl:
//
//	etcdctl role add ROLE
//	etcdctl role grant-permission --prefix=true ROLE readwrite PREFIX
//	etcdctl user add USER
//	etcdctl user grant-role USER ROLE
//
// It needs a cluster started WithAuth.
func (c *Cluster) AddPrefixUser(t testing.TB, user, password, prefix string) {
	t.Helper()
	if c.cfg.secure.rootPassword == "" {
		t.Fatalf("embedtest: AddPrefixUser needs a cluster started WithAuth")
	}
	admin := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	role := user + "-role"
	steps := []struct {
		what string
		do   func() error
	}{
		{"role add", func() error { _, err := admin.RoleAdd(ctx, role); return err }},
		{"role grant-permission", func() error {
			_, err := admin.RoleGrantPermission(ctx, role, prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		}},
		{"user add", func() error { _, err := admin.UserAdd(ctx, user, password); return err }},
		{"user grant-role", func() error { _, err := admin.UserGrantRole(ctx, user, role); return err }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("embedtest: %s for %s: %v", s.what, user, err)
		}
	}
}

// makeCerts writes a CA, a member certificate and a client certificate,
// each with its key, as PEM files under dir.
func makeCerts(dir string) (*TLSFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f := &TLSFiles{
		CA: filepath.Join(dir, "ca.pem"), CAKey: filepath.Join(dir, "ca-key.pem"),
		MemberCert: filepath.Join(dir, "member.pem"), MemberKey: filepath.Join(dir, "member-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "leasegate embedtest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, ca, err := sign(caTmpl, nil, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(f.CA, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	caKeyDER, err := x509.MarshalPKCS8PrivateKey(caKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(f.CAKey, "PRIVATE KEY", caKeyDER); err != nil {
		return nil, err
	}
	leaves := []struct {
		cert, key string
		tmpl      *x509.Certificate
	}{
		{f.MemberCert, f.MemberKey, &x509.Certificate{
			Subject:     pkix.Name{CommonName: "leasegate embedtest member"},
			DNSNames:    []string{"localhost"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}},
		{f.ClientCert, f.ClientKey, &x509.Certificate{
			// Not a user name: with auth on, a request without a password
			// login would otherwise run as the certificate's CN.
			Subject:     pkix.Name{CommonName: "leasegate-embedtest-client"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
	}
	for _, l := range leaves {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		l.tmpl.NotBefore, l.tmpl.NotAfter = caTmpl.NotBefore, caTmpl.NotAfter
		l.tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, _, err := sign(l.tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, err
		}
		if err := writePEM(l.cert, "CERTIFICATE", der); err != nil {
			return nil, err
		}
		if err := writePEM(l.key, "PRIVATE KEY", keyDER); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// sign issues tmpl signed by parent's key (self-signed when parent is nil).
func sign(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) ([]byte, *x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return der, cert, err
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
