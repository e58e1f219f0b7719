package cli_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	pkcs12 "software.sslmate.com/src/go-pkcs12"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/console"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// serve --dev on an existing etcd (--endpoints) writes its certificates,
// prints its address and a curl line, logs its start at info (a server's
// default level, with no --log-level), serves a worker through the Go
// client, and stops cleanly on its context.
func TestServeDev(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	b := e.start(t, "serve", "--dev", dir, "--listen", "127.0.0.1:0")
	line := b.stdout.waitFor(t, "\n")
	b.stderr.waitFor(t, "gateway serving")
	var out struct {
		Disposition string   `json:"disposition"`
		Address     string   `json:"address"`
		Curl        string   `json:"curl"`
		Console     string   `json:"console"`
		Browser     []string `json:"browser"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(line, "\n", 2)[0]), &out); err != nil {
		t.Fatalf("serve printed %q: %v", line, err)
	}
	if out.Disposition != "ok" || !strings.HasPrefix(out.Address, "https://127.0.0.1:") || !strings.Contains(out.Curl, out.Address) {
		t.Fatalf("serve printed %+v", out)
	}
	if out.Console != out.Address+"/console/" || !strings.Contains(strings.Join(out.Browser, " "), filepath.Join(dir, "operator.p12")) {
		t.Fatalf("serve printed console %q and browser steps %q: want the console's URL and the operator's PKCS#12 file", out.Console, out.Browser)
	}
	tlsCfg, err := client.TLSConfig(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "worker.pem"), filepath.Join(dir, "worker-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	// The console answers the worker's certificate; the PKCS#12 file holds
	// that certificate, under the password printed.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: lgtest.Timeout}
	resp, err := hc.Get(out.Console)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	hc.CloseIdleConnections()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "spiffe://leasegate.dev/worker") {
		t.Fatalf("console answered %d for the worker: %.300s", resp.StatusCode, page)
	}
	p12, err := os.ReadFile(filepath.Join(dir, "worker.p12"))
	if err != nil {
		t.Fatal(err)
	}
	_, leaf, _, err := pkcs12.DecodeChain(p12, console.DevPKCS12Password)
	if err != nil || len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://leasegate.dev/worker" {
		t.Fatalf("worker.p12: %v, %v", leaf, err)
	}
	gw, err := client.New(out.Address, tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	ctx := lgtest.Ctx(t)
	s, err := gw.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	g, err := s.Claim(ctx, "demo", "checkout")
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if _, err := gw.Commit(ctx, g, fencedtxn.Intent{Tenant: "demo", Task: "checkout", Operation: "op-1", Value: []byte("hi")}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	// The gateway wrote under the global --prefix, on the given etcd.
	if o, err := e.co.Owner(ctx, "demo", "checkout"); err != nil || o.Owner != g.Owner || !strings.HasPrefix(g.Owner, "spiffe://") {
		t.Fatalf("owner through etcd: %+v, %v (grant %+v)", o, err, g)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	b.cancel()
	if r := b.wait(t); r.code != 0 {
		t.Fatalf("serve exited %d: %s", r.code, r.stderr)
	}
}

// serve --config reads the server's file: etcd, TLS, identities, session
// key and adapters from it, none from the worker.
func TestServeConfig(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	certs, err := gateway.WriteDevCerts(dir, "test.example", "w1")
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "session.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("k", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(gateway.Config{
		Listen:         "127.0.0.1:0",
		TLS:            gateway.TLSFiles{Cert: certs.ServerCert, Key: certs.ServerKey, ClientCA: certs.CA},
		Etcd:           gateway.EtcdConfig{Endpoints: e.endpoints, Prefix: e.prefix},
		SessionKeyFile: key,
		Identities:     []gateway.Identity{{ID: certs.IDs["w1"], Roles: []gateway.Role{gateway.RoleWorker}, Tenants: []string{"acme"}}},
		Adapters:       []gateway.AdapterConfig{{Kind: "dns.upsert", Type: "dev-dns"}},
	})
	path := filepath.Join(dir, "gateway.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	b := startApp(t, "-o", "json", "serve", "--config", path)
	line := b.stdout.waitFor(t, "\n")
	var out struct{ Address string }
	if err := json.Unmarshal([]byte(strings.SplitN(line, "\n", 2)[0]), &out); err != nil {
		t.Fatalf("serve printed %q: %v", line, err)
	}
	tlsCfg, err := client.TLSConfig(certs.CA, certs.Clients["w1"].Cert, certs.Clients["w1"].Key)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := client.New(out.Address, tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	ctx := lgtest.Ctx(t)
	s, err := gw.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	defer func() { _ = s.Close(ctx) }()
	if _, err := s.Claim(ctx, "acme", "invoices"); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if o, err := e.co.Owner(ctx, "acme", "invoices"); err != nil || o.Owner != certs.IDs["w1"] {
		t.Fatalf("owner under the configured prefix: %+v, %v", o, err)
	}
	_, err = s.Claim(ctx, "other", "invoices") // not the identity's tenant
	lgtest.Want(t, err, coordinator.PermissionDenied)
}

// serve wants exactly one of --config and --dev, before any I/O.
func TestServeNeedsConfigOrDev(t *testing.T) {
	r := execApp(t, call{}, "-o", "json", "serve")
	want(t, r, 2, coordinator.InvalidInput)
}

// TestServeDevIgnoresEndpointsFromTheEnvironment: serve --dev writes dev
// data, so an exported LEASEGATE_ENDPOINTS alone does not send it to a
// cluster — with the variable naming an address no etcd listens on, it
// serves on its own embedded etcd. On the command line the address is the
// etcd it uses, here unreachable: a hold, exit 3.
func TestServeDevIgnoresEndpointsFromTheEnvironment(t *testing.T) {
	const noEtcd = "127.0.0.1:1" // tcpmux's port: no etcd listens there
	t.Setenv("LEASEGATE_ENDPOINTS", noEtcd)
	b := startApp(t, "--command-timeout", "1s", "-o", "json", "serve", "--dev", t.TempDir(), "--listen", "127.0.0.1:0")
	line := b.stdout.waitFor(t, "\n")
	var out struct {
		Disposition string   `json:"disposition"`
		Endpoints   []string `json:"endpoints"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(line, "\n", 2)[0]), &out); err != nil {
		t.Fatalf("serve printed %q: %v", line, err)
	}
	if out.Disposition != "ok" || len(out.Endpoints) != 1 || strings.Contains(out.Endpoints[0], noEtcd) {
		t.Fatalf("serve --dev with %s in the environment: %+v\nstderr: %s", noEtcd, out, b.stderr.String())
	}
	b.stderr.waitFor(t, "serve --dev ignores LEASEGATE_ENDPOINTS")
	b.cancel()
	if r := b.wait(t); r.code != 0 {
		t.Fatalf("serve exited %d: %s", r.code, r.stderr)
	}
	// On the command line it counts (the environment names a live cluster).
	t.Setenv("LEASEGATE_ENDPOINTS", strings.Join(shared.Endpoints(), ","))
	r := execApp(t, call{}, "--endpoints", noEtcd, "--command-timeout", "1s", "--log-level", "error", "-o", "json",
		"serve", "--dev", t.TempDir(), "--listen", "127.0.0.1:0")
	want(t, r, cli.ExitUnavailable, coordinator.AuthorityUnavailable)
}

// serve --dev restarted on the same directory keeps what a caller holds:
// the certificates it loaded (the CA is not rewritten), its session token
// (the session key is kept), the task it claimed (etcd's data is kept), and
// says in its log that the simulated providers started afresh.
func TestServeDevRestartKeepsCertificatesAndSessions(t *testing.T) {
	dir := t.TempDir()
	serve := func() (*background, string) {
		b := startApp(t, "-o", "json", "serve", "--dev", dir, "--listen", "127.0.0.1:0")
		line := b.stdout.waitFor(t, "\n")
		var out struct{ Address string }
		if err := json.Unmarshal([]byte(strings.SplitN(line, "\n", 2)[0]), &out); err != nil {
			t.Fatalf("serve printed %q: %v", line, err)
		}
		return b, out.Address
	}
	b, addr := serve()
	j := newJSONCaller(t, addr, dir) // loads the certificates now
	s := j.call("worker", "WorkerService/OpenSession", `{"ttl":"60s"}`, 200)
	tok := at(s, "renewal", "token").(string)
	g := at(j.call("worker", "WorkerService/Claim", `{"sessionToken":"`+tok+`","tenant":"demo","task":"checkout"}`, 200), "grant")
	b.cancel()
	if r := b.wait(t); r.code != 0 {
		t.Fatalf("serve exited %d: %s", r.code, r.stderr)
	}

	b2, addr2 := serve()
	b2.stderr.waitFor(t, "simulated providers start afresh")
	j.base = addr2
	j.call("worker", "WorkerService/RenewSession", `{"sessionToken":"`+tok+`"}`, 200)
	o := at(j.call("worker", "WorkerService/GetOwnership", `{"tenant":"demo","task":"checkout"}`, 200), "ownership").(map[string]any)
	if o["lease"] != at(s, "session", "lease") || o["epoch"] != g.(map[string]any)["epoch"] {
		t.Fatalf("after the restart the task is %v, want held by the grant %v", o, g)
	}
}

// serve --config checks the whole configuration — the file, the files it
// names, every adapter — before it dials etcd or listens: each fault is
// exit 2 (invalid_input) with one line naming the field, and nothing
// served. etcd is a dead endpoint here, so a check that came after the
// dial would answer authority_unavailable instead. Each case is green only
// while its check is there.
func TestServeConfigRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	certs, err := gateway.WriteDevCerts(filepath.Join(dir, "pki"), "test.example", "w1")
	if err != nil {
		t.Fatal(err)
	}
	file := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := file("session.key", strings.Repeat("k", 32), 0o600)
	openKey := file("open-session.key", strings.Repeat("k", 32), 0o644)
	shortKey := file("short-session.key", "short", 0o600)
	openTLSKey := file("open-server-key.pem", readFile(t, certs.ServerKey), 0o644)
	password := file("etcd.password", "pw\n", 0o600)
	pgPassword := file("pg.password", "pw\n", 0o600)
	listen := deadEndpoint(t)
	base := func() map[string]any {
		return map[string]any{
			"listen":           listen,
			"tls":              map[string]string{"cert": certs.ServerCert, "key": certs.ServerKey, "client_ca": certs.CA},
			"etcd":             map[string]any{"endpoints": []string{deadEndpoint(t)}},
			"session_key_file": key,
			"identities":       []map[string]any{{"id": certs.IDs["w1"], "roles": []string{"worker"}, "tenants": []string{"acme"}}},
			"adapters": []map[string]any{{"type": "pgpromote", "pgpromote": map[string]any{
				"nodes":         []map[string]string{{"name": "db-a", "conn": "host=127.0.0.1 port=5432 user=leasegate"}, {"name": "db-b", "conn": "host=127.0.0.1 port=5433 user=leasegate"}},
				"password_file": pgPassword}}},
		}
	}
	for _, c := range []struct {
		name   string
		change func(m map[string]any)
		says   string
	}{
		{"an unknown field", func(m map[string]any) { m["adapter"] = []any{} }, `unknown field "adapter"`},
		{"no session key file", func(m map[string]any) { m["session_key_file"] = filepath.Join(dir, "absent") }, "session_key_file: session key file: open"},
		{"a session key others may read", func(m map[string]any) { m["session_key_file"] = openKey }, "session_key_file: session key file " + openKey + " has mode 0644"},
		{"a short session key", func(m map[string]any) { m["session_key_file"] = shortKey }, "session_key_file: " + shortKey + " holds 5 bytes, at least 32"},
		{"a server key others may read", func(m map[string]any) { m["tls"].(map[string]string)["key"] = openTLSKey }, "tls.key: server key file " + openTLSKey + " has mode 0644"},
		{"a server certificate that does not load", func(m map[string]any) { m["tls"].(map[string]string)["cert"] = certs.CA + ".absent" }, "tls: gateway: server certificate"},
		{"an etcd password without a user", func(m map[string]any) { m["etcd"].(map[string]any)["password_file"] = password }, "etcd.password_file: a password without etcd.user"},
		{"an etcd password file missing", func(m map[string]any) {
			m["etcd"].(map[string]any)["user"] = "leasegate"
			m["etcd"].(map[string]any)["password_file"] = filepath.Join(dir, "absent")
		}, "etcd.password_file: etcd password file: open"},
		{"an etcd client key that does not load", func(m map[string]any) {
			m["etcd"].(map[string]any)["cert"] = certs.Clients["w1"].Cert
			m["etcd"].(map[string]any)["key"] = filepath.Join(dir, "absent")
		}, "etcd.key: etcd client key file: stat"},
		{"an adapter's bad credential path", func(m map[string]any) {
			m["adapters"].([]map[string]any)[0]["pgpromote"].(map[string]any)["password_file"] = filepath.Join(dir, "absent")
		}, "adapters[0].pgpromote.password_file: password file: open"},
		{"an effect kind served twice", func(m map[string]any) {
			m["adapters"] = append(m["adapters"].([]map[string]any), map[string]any{"type": "dev-topology"})
		}, `adapters[1].kind: effect kind "db.promote" served twice`},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := base()
			c.change(m)
			b, _ := json.Marshal(m)
			path := filepath.Join(t.TempDir(), "gateway.json")
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			r := execApp(t, call{}, "-o", "json", "serve", "--config", path)
			out := want(t, r, 2, coordinator.InvalidInput)
			if _, served := out["address"]; served || !strings.Contains(r.stderr, c.says) {
				t.Fatalf("stdout %q, stderr %q: want nothing served and the line to say %q", r.stdout, r.stderr, c.says)
			}
		})
	}
}

// serve --config FILE --check checks as a start does and exits: each
// adapter with its provider's probe (a provider that does not answer from
// here is NOT_SERVING and still exit 0: a start would serve), nothing
// dialled nor listened; a bad configuration is exit 2 as at a start;
// --check without --config is refused before any I/O.
func TestServeCheck(t *testing.T) {
	dir := t.TempDir()
	certs, err := gateway.WriteDevCerts(filepath.Join(dir, "pki"), "test.example", "w1")
	if err != nil {
		t.Fatal(err)
	}
	key, pw := filepath.Join(dir, "session.key"), filepath.Join(dir, "pg.password")
	for p, content := range map[string]string{key: strings.Repeat("k", 32), pw: "pw\n"} {
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	listen := deadEndpoint(t)
	dead := "host=127.0.0.1 port=1 user=leasegate connect_timeout=2"
	cfg := map[string]any{
		"listen":           listen,
		"tls":              map[string]string{"cert": certs.ServerCert, "key": certs.ServerKey, "client_ca": certs.CA},
		"etcd":             map[string]any{"endpoints": []string{deadEndpoint(t)}},
		"session_key_file": key,
		"adapters": []map[string]any{
			{"type": "pgpromote", "pgpromote": map[string]any{"nodes": []map[string]string{{"name": "db-a", "conn": dead}, {"name": "db-b", "conn": dead}}, "password_file": pw}},
			{"type": "dev-dns"},
		},
	}
	write := func(m map[string]any) string {
		b, _ := json.Marshal(m)
		p := filepath.Join(t.TempDir(), "gateway.json")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	r := execApp(t, call{}, "-o", "json", "serve", "--config", write(cfg), "--check")
	out := want(t, r, 0, coordinator.OK)
	var got struct {
		Adapters []struct{ Kind, Type, Health, Error string }
	}
	b, _ := json.Marshal(out)
	_ = json.Unmarshal(b, &got)
	if len(got.Adapters) != 2 || got.Adapters[0].Kind != "db.promote" || got.Adapters[0].Health != "NOT_SERVING" ||
		!strings.Contains(got.Adapters[0].Error, "db-a: ") || got.Adapters[1].Kind != "dns.upsert" || got.Adapters[1].Health != "SERVING" {
		t.Fatalf("--check printed %s", r.stdout)
	}
	if l, err := net.Listen("tcp", listen); err != nil { // nothing took the address
		t.Fatalf("--check listened on %s: %v", listen, err)
	} else {
		l.Close()
	}

	cfg["adapters"] = append(cfg["adapters"].([]map[string]any), map[string]any{"type": "dev-topology"})
	r = execApp(t, call{}, "-o", "json", "serve", "--config", write(cfg), "--check")
	want(t, r, 2, coordinator.InvalidInput)
	if !strings.Contains(r.stderr, `adapters[2].kind: effect kind "db.promote" served twice`) {
		t.Fatalf("stderr %q", r.stderr)
	}
	want(t, execApp(t, call{}, "-o", "json", "serve", "--dev", dir, "--check"), 2, coordinator.InvalidInput)
}

// A real `leasegate serve --config` process rereads its policy file on
// SIGHUP and goes on serving: the new policy is logged as reloaded on
// SIGHUP, a worker's call is served after it, and SIGTERM then stops it
// with exit 0. (Every other command stops on SIGHUP.)
func TestServeReloadsThePolicyOnSIGHUP(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	certs, err := gateway.WriteDevCerts(dir, "test.example", "w1")
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "session.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("k", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "policy.json")
	writePolicy := func(version string) {
		if err := os.WriteFile(policy, []byte(`{"version":"`+version+`","rules":{"traffic":"follows the writer"}}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writePolicy("v1")
	cfg, _ := json.Marshal(gateway.Config{
		Listen:         "127.0.0.1:0",
		TLS:            gateway.TLSFiles{Cert: certs.ServerCert, Key: certs.ServerKey, ClientCA: certs.CA},
		Etcd:           gateway.EtcdConfig{Endpoints: e.endpoints, Prefix: e.prefix},
		SessionKeyFile: key,
		Identities:     []gateway.Identity{{ID: certs.IDs["w1"], Roles: []gateway.Role{gateway.RoleWorker}, Tenants: []string{"acme"}}},
		Adapters:       []gateway.AdapterConfig{{Kind: "dns.upsert", Type: "dev-dns"}},
		PolicyFile:     policy,
	})
	path := filepath.Join(dir, "gateway.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-o", "json", "serve", "--config", path)
	cmd.Env = []string{asBinary + "=1"}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for range lines { //nolint:revive // drain until the process is gone
		}
	})
	waitLine := func(want ...string) string {
		t.Helper()
		timeout := time.After(lgtest.Timeout)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("serve ended before logging %q", want)
				}
				all := true
				for _, w := range want {
					all = all && strings.Contains(l, w)
				}
				if all {
					return l
				}
			case <-timeout:
				t.Fatalf("serve logged no line with %q", want)
			}
		}
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed %q: %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	var out struct{ Address string }
	if err := json.Unmarshal([]byte(line), &out); err != nil || out.Address == "" {
		t.Fatalf("serve printed %q: %v", line, err)
	}
	waitLine("gateway serving")

	writePolicy("v2")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLine("policy reloaded on SIGHUP", "v2@")

	tlsCfg, err := client.TLSConfig(certs.CA, certs.Clients["w1"].Cert, certs.Clients["w1"].Key)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := client.New(out.Address, tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	ctx := lgtest.Ctx(t)
	s, err := gw.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatalf("OpenSession after SIGHUP: %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range lines { //nolint:revive // drain until the process is gone
	}
	if err := <-exited; err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
}
