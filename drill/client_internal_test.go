package drill

import (
	"crypto/tls"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestWorkerClientKeepsTheSecretOutOfTheSpec: a real-provider worker gets
// the drill's client's user, dial timeout and TLS files in its spec (its
// environment), and its password and token in a file only this user reads
// (0600); its own client configuration reads them back.
func TestWorkerClientKeepsTheSecretOutOfTheSpec(t *testing.T) {
	const password, token = "pw-not-in-the-spec", "token-not-in-the-spec"
	files := transport.TLSInfo{TrustedCAFile: "/ca.pem", CertFile: "/client.pem", KeyFile: "/client-key.pem"}
	c := &config{clientConfig: &clientv3.Config{Username: "drill", Password: password, Token: token, DialTimeout: 7 * time.Second, TLS: &tls.Config{}},
		tlsFiles: &files}
	wc, err := newWorkerClient(c, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	spec, err := json.Marshal(workerSpec{Endpoints: []string{"https://127.0.0.1:2379"}, Client: wc})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(spec), password) || strings.Contains(string(spec), token) {
		t.Fatalf("the spec, the worker's environment, holds the secret: %s", spec)
	}
	st, err := os.Stat(wc.SecretFile)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("the secret file's mode is %v, want 0600", st.Mode().Perm())
	}
	var back workerSpec
	if err := json.Unmarshal(spec, &back); err != nil {
		t.Fatal(err)
	}
	if *back.Client != (workerClient{DialTimeout: 7 * time.Second, CACert: files.TrustedCAFile, Cert: files.CertFile, Key: files.KeyFile,
		User: "drill", SecretFile: wc.SecretFile}) {
		t.Errorf("the worker's client settings %+v", *back.Client)
	}
	back.Client.CACert, back.Client.Cert, back.Client.Key = "", "", "" // the files named are not there
	cfg, err := back.Client.config(back.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Username != "drill" || cfg.Password != password || cfg.Token != token || cfg.DialTimeout != 7*time.Second || len(cfg.DialOptions) == 0 {
		t.Errorf("the worker's client configuration: user %q, password %q, token %q, dial timeout %v, %d dial options",
			cfg.Username, cfg.Password, cfg.Token, cfg.DialTimeout, len(cfg.DialOptions))
	}

	t.Run("no login, no file", func(t *testing.T) {
		wc, err := newWorkerClient(&config{clientConfig: &clientv3.Config{}}, t.TempDir())
		if err != nil || wc.SecretFile != "" {
			t.Fatalf("%+v, %v", wc, err)
		}
	})
}

// TestCheckClient: the client settings Run refuses before any I/O.
func TestCheckClient(t *testing.T) {
	files := &transport.TLSInfo{TrustedCAFile: "/ca.pem"}
	withTLS := &clientv3.Config{TLS: &tls.Config{}}
	for _, tc := range []struct {
		name string
		c    config
		ok   bool
	}{
		{"nothing", config{}, true},
		{"a config without TLS", config{clientConfig: &clientv3.Config{Username: "u", Password: "p"}, real: &RealProviders{}}, true},
		{"TLS and its files, real providers", config{clientConfig: withTLS, tlsFiles: files, real: &RealProviders{}}, true},
		{"TLS without its files, simulated providers", config{clientConfig: withTLS}, true},
		{"TLS without its files, real providers", config{clientConfig: withTLS, real: &RealProviders{}}, false},
		{"files without a config", config{tlsFiles: files}, false},
		{"files with a config without TLS", config{clientConfig: &clientv3.Config{}, tlsFiles: files}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkClient(&tc.c); (err == nil) != tc.ok {
				t.Fatalf("checkClient: %v, want ok %v", err, tc.ok)
			}
		})
	}
}
