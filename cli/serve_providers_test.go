package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/grpchealth"
	"github.com/miekg/dns"

	"github.com/leasegate/leasegate/adapters/dnsupdate"
	"github.com/leasegate/leasegate/adapters/pgpromote"
	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/ledger"
	"github.com/leasegate/leasegate/testsupport/lgtest"
	"github.com/leasegate/leasegate/testsupport/realprov"
)

// asWorker makes the test binary a worker process of the gateway's
// (workerMain).
const asWorker = "LEASEGATE_CLI_TEST_AS_WORKER"

// workerEnv is a worker process's whole configuration: where the gateway
// is and the worker's own certificate. No etcd endpoint, no provider
// address, no provider credential.
var workerEnv = []string{"LEASEGATE_WORKER_GATEWAY", "LEASEGATE_WORKER_CA", "LEASEGATE_WORKER_CERT", "LEASEGATE_WORKER_KEY"}

type workerCommand struct {
	Do           string             `json:"do"` // claim, observe, propose, dispatch
	Tenant       string             `json:"tenant,omitempty"`
	Task         string             `json:"task,omitempty"`
	Operation    string             `json:"operation,omitempty"`
	Effect       ledger.Effect      `json:"effect,omitzero"`
	Precondition ledger.Observation `json:"precondition,omitzero"`
}

type workerAnswer struct {
	Grant        coordinator.Grant  `json:"grant,omitzero"`
	Precondition ledger.Observation `json:"precondition,omitzero"`
	Record       ledger.Record      `json:"record,omitzero"`
	Error        string             `json:"error,omitempty"`
}

// workerMain is the worker process: it opens a session (kept alive) on the
// gateway, then reads one command a line on stdin and answers one JSON
// line each on stdout, until stdin closes.
func workerMain() int {
	cfg, err := client.TLSConfig(os.Getenv("LEASEGATE_WORKER_CA"), os.Getenv("LEASEGATE_WORKER_CERT"), os.Getenv("LEASEGATE_WORKER_KEY"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	gw, err := client.New(os.Getenv("LEASEGATE_WORKER_GATEWAY"), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer gw.Close()
	ctx := context.Background()
	s, err := gw.OpenSession(ctx, 10*time.Second, client.WithKeepAlive())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = s.Close(ctx) }()
	var g coordinator.Grant
	in, out := bufio.NewScanner(os.Stdin), json.NewEncoder(os.Stdout)
	for in.Scan() {
		var c workerCommand
		var a workerAnswer
		if err = json.Unmarshal(in.Bytes(), &c); err == nil {
			switch c.Do {
			case "claim":
				g, err = s.Claim(ctx, c.Tenant, c.Task)
				a.Grant = g
			case "observe":
				a.Precondition, err = gw.ObservePrecondition(ctx, g, c.Effect)
			case "propose":
				a.Record, err = gw.Propose(ctx, g, c.Operation, c.Effect, c.Precondition)
			case "dispatch":
				a.Record, err = gw.Dispatch(ctx, g, c.Operation)
			default:
				err = fmt.Errorf("unknown command %q", c.Do)
			}
		}
		if err != nil {
			a.Error = err.Error()
		}
		if err := out.Encode(a); err != nil {
			return 1
		}
	}
	return 0
}

// workerProcess is a running worker process.
type workerProcess struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Scanner
}

func startWorker(t *testing.T, env map[string]string) *workerProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{asWorker + "=1"}
	for _, k := range workerEnv {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("worker process: %v: %s", err, stderr.String())
		}
	})
	return &workerProcess{t: t, in: in, out: bufio.NewScanner(out)}
}

func (w *workerProcess) do(c workerCommand) workerAnswer {
	w.t.Helper()
	b, _ := json.Marshal(c)
	if _, err := w.in.Write(append(b, '\n')); err != nil {
		w.t.Fatalf("worker: %v", err)
	}
	if !w.out.Scan() {
		w.t.Fatalf("worker: no answer to %s: %v", c.Do, w.out.Err())
	}
	var a workerAnswer
	if err := json.Unmarshal(w.out.Bytes(), &a); err != nil {
		w.t.Fatalf("worker answered %q: %v", w.out.Text(), err)
	}
	if a.Error != "" {
		w.t.Fatalf("worker %s: %s", c.Do, a.Error)
	}
	return a
}

// gatewayProcess runs `leasegate serve --config path` as its own process
// (the test binary as leasegate) and returns its address; it is stopped
// with SIGTERM at the end of the test and must exit 0.
func gatewayProcess(t *testing.T, path string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-o", "json", "serve", "--config", path)
	cmd.Env = []string{asBinary + "=1"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("leasegate serve: %v: %s", err, stderr.String())
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		stopped = true
		t.Fatalf("leasegate serve printed %q: %v: %s", line, err, stderr.String())
	}
	var o struct{ Address string }
	if err := json.Unmarshal([]byte(line), &o); err != nil || o.Address == "" {
		t.Fatalf("leasegate serve printed %q: %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return o.Address
}

// The seed's corrected design on real providers: `leasegate serve` holds
// the PostgreSQL password, the TSIG secret and the origin service's token
// (its config names the files);
// a worker process that holds neither — its whole configuration is the
// gateway's address and its own certificate — claims, reads each effect's
// precondition through the gateway (ObservePrecondition: the gateway's
// adapters, with the gateway's credentials), proposes a
// promotion of the standby, the traffic record's move and the origin
// service's change (Idempotency-Key), an approver
// identity authorizes each, the worker dispatches, and the real servers
// show the effects: the standby is the writer on a new timeline (its log
// shows pg_promote sent from the gateway's connection, under the operation
// id), named answers the new address, the origin service applied its
// change once under the operation id.
func TestServeConfigRealProviders(t *testing.T) {
	pair := realprov.NewPGPair(t)
	named := realprov.NewDNSServer(t, "checkout 60 IN A 10.0.0.1")
	origins := realprov.NewIdemServer(t, map[string]string{"checkout": "db-a"})
	e := newEnv(t)
	dir := t.TempDir()
	certs, err := gateway.WriteDevCerts(filepath.Join(dir, "pki"), "northstar.example", "relay-worker", "commander")
	if err != nil {
		t.Fatal(err)
	}
	secret := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tsigSecret := secret("tsig.secret", named.Secret()+"\n")
	sessionKey := secret("session.key", strings.Repeat("s", 32))
	originsToken := secret("origins.token", "tok-origins\n")
	cfg := map[string]any{
		"listen":           "127.0.0.1:0",
		"tls":              map[string]string{"cert": certs.ServerCert, "key": certs.ServerKey, "client_ca": certs.CA},
		"etcd":             map[string]any{"endpoints": e.endpoints, "prefix": e.prefix},
		"session_key_file": sessionKey,
		"identities": []map[string]any{
			{"id": certs.IDs["relay-worker"], "roles": []string{"worker"}, "tenants": []string{"northstar"}},
			{"id": certs.IDs["commander"], "roles": []string{"approver"}, "tenants": []string{"northstar"}},
		},
		"adapters": []map[string]any{
			{"type": "pgpromote", "pgpromote": map[string]any{
				"nodes": []map[string]string{
					{"name": "db-a", "conn": pair.Primary.ConnString()}, {"name": "db-b", "conn": pair.Standby.ConnString()}},
				"password_file": pair.PasswordFile, "promote_wait": "30s"}},
			{"type": "dnsupdate", "dnsupdate": map[string]any{
				"server": named.Addr, "zone": named.Zone, "tsig_key_name": named.KeyName,
				"tsig_algorithm": realprov.DNSKeyAlg, "tsig_secret_file": tsigSecret}},
			{"type": "httpidem", "kind": "cdn.origin", "httpidem": map[string]any{
				"url": origins.URL + "/v1/records", "lookup": origins.URL + "/v1/changes?idempotency_key={key}",
				"key_retention": "1h", "token_file": originsToken}},
		},
	}
	b, _ := json.Marshal(cfg)
	path := secret("gateway.json", string(b))
	addr := gatewayProcess(t, path)
	ctx := lgtest.Ctx(t)

	// The worker's configuration holds no credential of a provider's: none
	// of its files holds the password or the secret.
	env := map[string]string{"LEASEGATE_WORKER_GATEWAY": addr, "LEASEGATE_WORKER_CA": certs.CA,
		"LEASEGATE_WORKER_CERT": certs.Clients["relay-worker"].Cert, "LEASEGATE_WORKER_KEY": certs.Clients["relay-worker"].Key}
	pgPassword, err := os.ReadFile(pair.PasswordFile)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range env {
		if k == "LEASEGATE_WORKER_GATEWAY" {
			continue
		}
		if b, err := os.ReadFile(v); err != nil || strings.Contains(string(b), strings.TrimSpace(string(pgPassword))) || strings.Contains(string(b), named.Secret()) || strings.Contains(string(b), "tok-origins") {
			t.Fatalf("%s=%s holds a provider credential (or cannot be read: %v)", k, v, err)
		}
	}
	w := startWorker(t, env)
	g := w.do(workerCommand{Do: "claim", Tenant: "northstar", Task: "failover"}).Grant
	if g.Owner != certs.IDs["relay-worker"] {
		t.Fatalf("claimed as %q, want the worker's certificate identity", g.Owner)
	}

	approver, err := client.TLSConfig(certs.CA, certs.Clients["commander"].Cert, certs.Clients["commander"].Key)
	if err != nil {
		t.Fatal(err)
	}
	commander, err := client.New(addr, approver)
	if err != nil {
		t.Fatal(err)
	}
	defer commander.Close()
	// The worker reads the world it proposes against through the gateway,
	// with no provider access of its own (nor does the test need any: the
	// effects are plain values), and the dispatch's revalidation agrees.
	settle := func(operation string, eff ledger.Effect) ledger.Record {
		t.Helper()
		seen := w.do(workerCommand{Do: "observe", Effect: eff}).Precondition
		if seen.Digest == "" || seen.At.IsZero() {
			t.Fatalf("%s: observed %+v, want the provider's world", operation, seen)
		}
		rec := w.do(workerCommand{Do: "propose", Operation: operation, Effect: eff, Precondition: seen}).Record
		if _, err := commander.Authorize(ctx, "northstar", "failover", operation,
			ledger.Approval{ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest, Note: "incident commander"}); err != nil {
			t.Fatalf("Authorize %s: %v", operation, err)
		}
		rec = w.do(workerCommand{Do: "dispatch", Operation: operation}).Record
		if rec.State != ledger.Confirmed {
			t.Fatalf("%s: %s, want CONFIRMED (evidence %s)", operation, rec.State, rec.Evidence.Detail)
		}
		return rec
	}

	promote := ledger.Effect{Kind: pgpromote.Kind, Target: "db-b", Params: json.RawMessage(`{"max_loss":"5s","target":"db-b"}`), Policy: "failover-v3"}
	settle("promote-db-b", promote)
	if rec, err := pair.Standby.InRecovery(ctx); err != nil || rec {
		t.Fatalf("db-b in recovery: %v, %v; want promoted", rec, err)
	}
	if sent := pair.Standby.Statements("pg_promote"); len(sent) != 1 || !strings.Contains(sent[0], "leasegate promote-db-b epoch") {
		t.Fatalf("db-b's log shows pg_promote %q, want once from the gateway under the operation id", sent)
	}

	trafficParams, _ := json.Marshal(dnsupdate.Params{Type: "A", Value: "10.0.0.2", TTL: 60})
	traffic := ledger.Effect{Kind: dnsupdate.Kind, Target: dns.CanonicalName("checkout." + named.Zone), Params: trafficParams, Policy: "failover-v3"}
	settle("traffic-to-db-b", traffic)
	r, err := named.Query(ctx, "checkout."+named.Zone, dns.TypeA)
	if err != nil || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.0.0.2" {
		t.Fatalf("named answers %v, %v; want checkout at 10.0.0.2", r, err)
	}

	origin := ledger.Effect{Kind: "cdn.origin", Target: "checkout", Params: json.RawMessage(`{"value":"db-b"}`), Policy: "failover-v3"}
	settle("origin-to-db-b", origin)
	if v, n := origins.Value("checkout"), origins.Applied("origin-to-db-b"); v != "db-b" || n != 1 {
		t.Fatalf("the origin service shows %q, applied %d times; want db-b once, under the operation id as its key", v, n)
	}

	// The gateway's health shows the three providers answering.
	hc := grpchealth.NewClient(&http.Client{Transport: &http.Transport{TLSClientConfig: approver}}, addr)
	for _, kind := range []string{pgpromote.Kind, dnsupdate.Kind, "cdn.origin"} {
		if res, err := hc.Check(ctx, &grpchealth.CheckRequest{Service: gateway.AdapterHealthService(kind)}); err != nil || res.Status != grpchealth.StatusServing {
			t.Fatalf("health of %s: %+v, %v; want SERVING", kind, res, err)
		}
	}
}
