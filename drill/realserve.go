package drill

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leasegate/leasegate/client"
	gw "github.com/leasegate/leasegate/gateway"
)

// The real-provider drill's gateway is `leasegate serve --config`: one
// process per run, holding the etcd client and the real adapters with
// their credentials (the PostgreSQL password file, the TSIG key file), in
// a configuration only it is given. The fenced workers reach it with their
// certificates (worker-a, worker-b: role worker), the world's commander
// with its own (incident-commander: approver and operator). The drill runs
// it from its own binary, as it runs its workers: the binary must include
// the leasegate command (package cli calls HostServe as it starts).

// serveEnv names the environment variable that makes a process the drill's
// `leasegate serve --config` (its value: the configuration's path).
const serveEnv = "LEASEGATE_DRILL_SERVE"

// serveMain is leasegate's command line (HostServe), nil when the binary
// does not include it.
var serveMain func(args []string) int

// HostServe gives the drill leasegate's command line, main(args) returning
// the exit code, so that a real-provider drill can run `leasegate serve
// --config` from its own binary. Package cli calls it as it starts; a
// process the drill started as its gateway runs it at once and exits.
func HostServe(main func(args []string) int) {
	serveMain = main
	if path, ok := os.LookupEnv(serveEnv); ok {
		os.Exit(main([]string{"leasegate", "--log-level", "warn", "-o", "json", "serve", "--config", path}))
	}
}

// realCallers are the identities of the real-provider gateway.
var realCallers = []string{"worker-a", "worker-b", commander}

// realServe is the run's `leasegate serve --config` process.
type realServe struct {
	dir    string
	addr   string
	certs  gw.DevCerts
	config string
	cmd    *exec.Cmd
	exited chan error
	stderr *lockedBuffer
	// commander is the world's commander's client.
	commander *client.Client
}

// startRealServe writes the gateway's certificates and configuration into
// a directory of the run's and starts `leasegate serve --config` on a
// loopback port.
func (r *runner) startRealServe(ctx context.Context) (_ *realServe, err error) {
	if serveMain == nil {
		return nil, errors.New("drill: the real-provider drill runs `leasegate serve --config` from its own binary, which does not include the leasegate command (import github.com/leasegate/leasegate/cli)")
	}
	dir, err := os.MkdirTemp("", "leasegate-drill-serve-")
	if err != nil {
		return nil, fmt.Errorf("drill: the gateway's directory: %w", err)
	}
	s := &realServe{dir: dir, exited: make(chan error, 1), stderr: &lockedBuffer{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.close())
		}
	}()
	if s.certs, err = gw.WriteDevCerts(filepath.Join(dir, "pki"), hopTrustDomain, realCallers...); err != nil {
		return nil, fmt.Errorf("drill: %w", err)
	}
	secret := func(name string, b []byte) (string, error) {
		p := filepath.Join(dir, name)
		return p, os.WriteFile(p, b, 0o600)
	}
	key := make([]byte, gw.MinSessionKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	keyFile, err := secret("session.key", key)
	if err != nil {
		return nil, err
	}
	p := r.cfg.real
	tenant := r.tenant(Fenced)
	etcd := gw.EtcdConfig{Endpoints: r.coord.Client().Endpoints(), Prefix: r.cfg.Prefix + "/trials"}
	if wc := r.worker; wc != nil {
		etcd.CACert, etcd.Cert, etcd.Key, etcd.User = wc.CACert, wc.Cert, wc.Key, wc.User
	}
	if cc := r.cfg.clientConfig; cc != nil {
		if cc.Token != "" && cc.Password == "" {
			return nil, errors.New("drill: the real-provider gateway logs in to etcd with a password, not a token")
		}
		if cc.Password != "" {
			if etcd.PasswordFile, err = secret("etcd.password", []byte(cc.Password)); err != nil {
				return nil, err
			}
		}
	}
	cfg := map[string]any{
		"listen":           "127.0.0.1:0",
		"tls":              gw.TLSFiles{Cert: s.certs.ServerCert, Key: s.certs.ServerKey, ClientCA: s.certs.CA},
		"etcd":             etcd,
		"session_key_file": keyFile,
		"identities": []gw.Identity{
			{ID: s.certs.IDs["worker-a"], Roles: []gw.Role{"worker"}, Tenants: []string{tenant}},
			{ID: s.certs.IDs["worker-b"], Roles: []gw.Role{"worker"}, Tenants: []string{tenant}},
			{ID: s.certs.IDs[commander], Roles: []gw.Role{"approver", "operator"}, Tenants: []string{tenant}},
		},
		"adapters": []map[string]any{
			{"type": "pgpromote", "pgpromote": map[string]any{
				"nodes":         []map[string]string{{"name": realOriginal, "conn": p.pair.Primary.ConnString()}, {"name": realTarget, "conn": p.standbyConn()}},
				"password_file": p.passwordFile, "promote_wait": realPromoteWait.String(), "dial_timeout": "1s"}},
			{"type": "dnsupdate", "dnsupdate": map[string]any{
				"server": p.dns.Addr, "zone": p.dns.Zone, "tsig_key_file": p.dns.KeyFile, "timeout": "2s"}},
		},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	if s.config, err = secret("gateway.json", b); err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("drill: the drill's executable: %w", err)
	}
	s.cmd = exec.Command(exe)
	s.cmd.Env = append(cleanEnv(), serveEnv+"="+s.config)
	s.cmd.Stderr = s.stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("drill: start leasegate serve: %w", err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		for sc.Scan() {
		}
	}()
	select {
	case l, ok := <-line:
		var o struct {
			Address string `json:"address"`
		}
		if !ok || json.Unmarshal([]byte(l), &o) != nil || o.Address == "" {
			return nil, fmt.Errorf("drill: leasegate serve printed %q: %s", l, strings.TrimSpace(s.stderr.String()))
		}
		s.addr = o.Address
	case <-time.After(time.Minute):
		return nil, fmt.Errorf("drill: leasegate serve did not start within a minute: %s", strings.TrimSpace(s.stderr.String()))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	f := s.certs.Clients[commander]
	tc, err := client.TLSConfig(s.certs.CA, f.Cert, f.Key)
	if err != nil {
		return nil, err
	}
	if s.commander, err = client.New(s.addr, tc); err != nil {
		return nil, err
	}
	return s, nil
}

// cleanEnv is the drill's environment without leasegate's own settings
// (the gateway's are its configuration's) and the drill's markers.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LEASEGATE_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// workerFiles is what a fenced worker is given: the gateway's address, the
// CA, and its own certificate and key.
func (s *realServe) workerFiles(name string) (addr, ca, cert, key string) {
	f := s.certs.Clients[name]
	return s.addr, s.certs.CA, f.Cert, f.Key
}

// close stops the gateway (SIGTERM: calls under way finish) and removes
// its directory.
func (s *realServe) close() error {
	var errs []error
	if s.commander != nil {
		s.commander.Close()
	}
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-s.exited:
			if err != nil {
				errs = append(errs, fmt.Errorf("drill: leasegate serve: %w: %s", err, strings.TrimSpace(s.stderr.String())))
			}
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
			errs = append(errs, errors.New("drill: leasegate serve did not stop within 30 s of SIGTERM: killed"))
		}
	}
	errs = append(errs, os.RemoveAll(s.dir))
	return errors.Join(errs...)
}

// lockedBuffer keeps the last 64 KiB written to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if len(l.b) > 64<<10 {
		l.b = l.b[len(l.b)-64<<10:]
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}
