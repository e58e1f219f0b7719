package cli_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// The worker's and operator's commands through --gateway reach etcd
// through leasegate serve, with the certificate's identity as owner or
// approver, the same exit codes and refusals; a command that does not work
// through it, --owner, --approver and --force are refused before any I/O.
func TestCommandsThroughTheGateway(t *testing.T) {
	gw := newGatewayEnv(t)
	e, certs := gw.env, gw.certs
	as := func(who string, args ...string) result { return gw.as(t, who, args...) }
	lg := func(args ...string) result { return as("w1", args...) }

	r := lg("claim", "--tenant", "acme", "--task", "invoices", "--ttl", "10s")
	out := wantViaGateway(t, r, 0, coordinator.Granted)
	grant := e.file(t, r.stdout)
	if out["grant"].(map[string]any)["owner"] != certs.IDs["w1"] {
		t.Fatalf("grant %v: the owner is not the certificate's identity", out)
	}
	wantViaGateway(t, lg("commit", "--grant", grant, "--operation", "op-1", "--value", "paid", "--expected-version", "0"), 0, coordinator.Committed)
	st := want(t, lg("get", "--tenant", "acme", "--task", "invoices"), 0, coordinator.OK)
	if st["state"].(map[string]any)["version"].(float64) != 1 {
		t.Fatalf("state %v, want version 1", st)
	}
	if o, err := e.co.Owner(lgtest.Ctx(t), "acme", "invoices"); err != nil || o.Owner != certs.IDs["w1"] {
		t.Fatalf("etcd shows %+v, %v", o, err)
	}
	wantViaGateway(t, lg("release", "--grant", grant), 0, coordinator.Released)
	wantViaGateway(t, lg("commit", "--grant", grant, "--operation", "op-2", "--value", "late", "--expected-version", "1"), 1, coordinator.ExpiredOwner)
	wantViaGateway(t, lg("claim", "--tenant", "other", "--task", "invoices", "--ttl", "10s"), 6, coordinator.PermissionDenied)

	// The reads and the operator's commands, each against the gateway, a
	// refusal's exit code included.
	r = lg("claim", "--tenant", "acme", "--task", "payroll", "--ttl", "30s")
	g2 := e.file(t, r.stdout)
	lease := want(t, r, 0, coordinator.Granted)["grant"].(map[string]any)["lease"].(string)
	realm, err := e.co.CurrentRealm(lgtest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		who   string
		args  []string
		code  int
		d     coordinator.Disposition
		check func(map[string]any) bool
	}{
		{"status", "w1", []string{"status", "--tenant", "acme", "--task", "payroll"}, 0, coordinator.OK,
			func(o map[string]any) bool { return o["ownership"].(map[string]any)["owner"] == certs.IDs["w1"] }},
		{"status of another tenant", "w1", []string{"status", "--tenant", "other", "--task", "payroll"}, 6, coordinator.PermissionDenied, nil},
		{"ops list", "w1", []string{"ops", "list", "--tenant", "acme"}, 0, coordinator.OK,
			func(o map[string]any) bool { return len(o["records"].([]any)) == 0 }},
		{"ops show of nothing", "w1", []string{"ops", "show", "--tenant", "acme", "--task", "payroll", "op-x"}, 2, coordinator.InvalidInput, nil},
		{"ops resolve of nothing", "op1", []string{"ops", "resolve", "--grant", g2, "--operation", "op-x", "--to", "SUPERSEDED", "--why", "w"}, 2, coordinator.InvalidInput, nil},
		{"ops resolve by an operator who is no worker", "op2", []string{"ops", "resolve", "--grant", g2, "--operation", "op-x", "--to", "SUPERSEDED", "--why", "w"}, 2, coordinator.InvalidInput, nil},
		{"ops resolve with --approver", "op1", []string{"ops", "resolve", "--grant", g2, "--operation", "op-x", "--to", "SUPERSEDED", "--approver", "imani", "--why", "w"}, 2, coordinator.InvalidInput, nil},
		{"realm show", "op1", []string{"realm", "show"}, 0, coordinator.OK, func(o map[string]any) bool { return o["realm"] == realm }},
		{"realm show by a worker", "w1", []string{"realm", "show"}, 6, coordinator.PermissionDenied, nil},
		{"lease revoke by a worker", "w1", []string{"lease", "revoke", "--lease", lease}, 6, coordinator.PermissionDenied, nil},
		{"lease revoke --force", "op1", []string{"lease", "revoke", "--force", "--lease", lease}, 2, coordinator.InvalidInput, nil},
		{"lease revoke", "op1", []string{"lease", "revoke", "--lease", lease}, 0, coordinator.OK, func(o map[string]any) bool { return o["lease"] == lease }},
		{"status after the revoke", "w1", []string{"status", "--tenant", "acme", "--task", "payroll"}, 0, coordinator.OK,
			func(o map[string]any) bool {
				return o["ownership"].(map[string]any)["owner"] == nil || o["ownership"].(map[string]any)["owner"] == ""
			}},
		{"ops resolve with a revoked grant", "op1", []string{"ops", "resolve", "--grant", g2, "--operation", "op-x", "--to", "SUPERSEDED", "--why", "w"}, 1, coordinator.ExpiredOwner, nil},
		{"claim anew", "w1", []string{"claim", "--tenant", "acme", "--task", "payroll", "--ttl", "30s"}, 0, coordinator.Granted, nil},
		{"ops resolve with a superseded grant", "op1", []string{"ops", "resolve", "--grant", g2, "--operation", "op-x", "--to", "SUPERSEDED", "--why", "w"}, 1, coordinator.StaleOwner, nil},
		{"ops resolve with a superseded grant by an operator of the tenant", "op2", []string{"ops", "resolve", "--grant", g2, "--operation", "op-x", "--to", "SUPERSEDED", "--why", "w"}, 1, coordinator.StaleOwner, nil},
		{"realm rotate", "op1", []string{"realm", "rotate"}, 0, coordinator.OK,
			func(o map[string]any) bool { return o["previous_realm"] == realm && o["realm"] != realm }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := wantViaGateway(t, as(tc.who, tc.args...), tc.code, tc.d)
			if tc.check != nil && !tc.check(out) {
				t.Fatalf("%v", out)
			}
		})
	}

	// watch: the owners, and a claim, until interrupted (exit 0).
	wctx, stopWatch := context.WithCancel(lgtest.Ctx(t))
	wout := newSyncBuffer()
	watched := make(chan result, 1)
	go func() {
		watched <- execApp(t, call{ctx: wctx, stdout: wout}, append(gw.gatewayArgs("w1", gw.url), "watch", "--tenant", "acme")...)
	}()
	waitFor := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(wout.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("watch printed no %s:\n%s", what, wout.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// (After the realm rotate above, no owner is current: the task claimed
	// now shows as owned or claimed, depending on when the watch started.)
	wantViaGateway(t, lg("claim", "--tenant", "acme", "--task", "ledger", "--ttl", "10s"), 0, coordinator.Granted)
	waitFor(`"task":"ledger"`)
	stopWatch()
	if r := <-watched; r.code != 0 || r.stderr != "" {
		t.Fatalf("interrupted watch: exit %d, stderr %q", r.code, r.stderr)
	}

	e.writesNothing(t, "a refused command", func() {
		for _, args := range [][]string{
			{"gc"}, {"run", "--tenant", "acme", "--task", "x", "--owner", "o", "--ttl", "10s", "true"},
			{"watch", "--metrics-addr", "127.0.0.1:0"},
			{"claim", "--tenant", "acme", "--task", "x", "--owner", "someone-else", "--ttl", "10s"},
		} {
			wantViaGateway(t, lg(args...), 2, coordinator.InvalidInput)
		}
	})
}

// gatewayEnv is a gateway on loopback TLS in front of the test's own
// prefix: w1 a worker of acme, op1 a worker and operator of every tenant,
// op2 an operator of acme only.
type gatewayEnv struct {
	*env
	certs gateway.DevCerts
	url   string
}

func newGatewayEnv(t *testing.T, opts ...gateway.Option) *gatewayEnv {
	t.Helper()
	return newGatewayEnvWrapped(t, nil, opts...)
}

// newGatewayEnvWrapped is newGatewayEnv with the gateway's handler wrapped
// by wrap (a fault between the CLI and the gateway).
func newGatewayEnvWrapped(t *testing.T, wrap func(http.Handler) http.Handler, opts ...gateway.Option) *gatewayEnv {
	t.Helper()
	e := newEnv(t)
	certs, err := gateway.WriteDevCerts(t.TempDir(), "test.example", "w1", "op1", "op2")
	if err != nil {
		t.Fatal(err)
	}
	co, err := coordinator.New(lgtest.Ctx(t), e.client(), coordinator.WithPrefix(e.prefix))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := gateway.New(co, append([]gateway.Option{gateway.WithSessionKey([]byte("0123456789abcdef0123456789abcdef")),
		gateway.WithIdentities(gateway.Identity{ID: certs.IDs["w1"], Roles: []gateway.Role{gateway.RoleWorker}, Tenants: []string{"acme"}},
			gateway.Identity{ID: certs.IDs["op1"], Roles: []gateway.Role{gateway.RoleWorker, gateway.RoleOperator}, Tenants: []string{gateway.AllTenants}},
			gateway.Identity{ID: certs.IDs["op2"], Roles: []gateway.Role{gateway.RoleOperator}, Tenants: []string{"acme"}})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := gateway.TLSConfig(certs.ServerCert, certs.ServerKey, certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewUnstartedServer(h)
	ts.EnableHTTP2, ts.TLS = true, tlsCfg
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return &gatewayEnv{env: e, certs: certs, url: ts.URL}
}

// gatewayArgs are the global flags of who's call through the gateway at url.
func (g *gatewayEnv) gatewayArgs(who, url string) []string {
	return []string{"--gateway", url, "--cacert", g.certs.CA, "--cert", g.certs.Clients[who].Cert, "--key", g.certs.Clients[who].Key, "-o", "json"}
}

// as runs `leasegate --gateway … -o json ARGS…` as who.
func (g *gatewayEnv) as(t *testing.T, who string, args ...string) result {
	t.Helper()
	return execApp(t, call{}, append(g.gatewayArgs(who, g.url), args...)...)
}

// sameJSON fails unless the last JSON objects of a (--endpoints) and b
// (--gateway) are equal once the fields in ignore are dropped at any depth
// (values that differ between two runs: TTLs left, revisions, leases).
func sameJSON(t *testing.T, a, b result, ignore ...string) {
	t.Helper()
	x, y := lastJSON(t, a.stdout), lastJSON(t, b.stdout)
	drop(x, ignore)
	drop(y, ignore)
	if !reflect.DeepEqual(x, y) {
		t.Fatalf("--endpoints and --gateway differ (ignoring %v):\n%s\n%s", ignore, a.stdout, b.stdout)
	}
}

func drop(v any, keys []string) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range keys {
			delete(v, k)
		}
		for _, x := range v {
			drop(x, keys)
		}
	case []any:
		for _, x := range v {
			drop(x, keys)
		}
	}
}

// loseAnswers runs the calls to procedures and then, while lose is set,
// drops their answers (the stream is reset after the gateway acted): what
// a client sees when the network fails after its request arrived.
func loseAnswers(lose *atomic.Bool, procedures ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
			if !lose.Load() || !slices.Contains(procedures, req.URL.Path) {
				next.ServeHTTP(rw, req)
				return
			}
			next.ServeHTTP(httptest.NewRecorder(), req)
			panic(http.ErrAbortHandler)
		})
	}
}

// sameShape fails unless the last JSON objects of a (--endpoints) and b
// (--gateway) have the same shape: the same keys at every depth, values of
// the same JSON types (arrays compared by their first elements).
func sameShape(t *testing.T, a, b result) {
	t.Helper()
	if d := shapeDiff("", lastJSON(t, a.stdout), lastJSON(t, b.stdout)); d != "" {
		t.Fatalf("--endpoints and --gateway answer in other shapes (%s):\n%s\n%s", d, a.stdout, b.stdout)
	}
}

func shapeDiff(path string, x, y any) string {
	switch x := x.(type) {
	case map[string]any:
		ym, ok := y.(map[string]any)
		if !ok {
			return path + ": an object and " + reflect.TypeOf(y).String()
		}
		for k := range x {
			if _, ok := ym[k]; !ok {
				return path + "." + k + ": only through --endpoints"
			}
		}
		for k := range ym {
			if _, ok := x[k]; !ok {
				return path + "." + k + ": only through --gateway"
			}
			if d := shapeDiff(path+"."+k, x[k], ym[k]); d != "" {
				return d
			}
		}
	case []any:
		ys, ok := y.([]any)
		if !ok {
			return path + ": an array and another type"
		}
		if len(x) > 0 && len(ys) > 0 {
			return shapeDiff(path+"[0]", x[0], ys[0])
		}
	default:
		if reflect.TypeOf(x) != reflect.TypeOf(y) {
			return fmt.Sprintf("%s: %T and %T", path, x, y)
		}
	}
	return ""
}

// wantViaGateway is want for an answer through the gateway: a refusal's
// line carries the hint of the -o json error, which is the disposition's
// own, except where that one would blame etcd for what the gateway decided
// (a role the certificate lacks) or could not do (be reached, answer).
func wantViaGateway(t *testing.T, r result, code int, d coordinator.Disposition) map[string]any {
	t.Helper()
	if code == 0 {
		return want(t, r, code, d)
	}
	obj := lastJSON(t, r.stdout)
	if r.code != code || obj["disposition"] != string(d) {
		t.Fatalf("exit %d, want %d with %s\nstdout: %s\nstderr: %s", r.code, code, d, r.stdout, r.stderr)
	}
	hint, _ := obj["hint"].(string)
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, string(d)+": "+hint) {
		t.Fatalf("stderr %q is not one line naming %s and the hint %q", r.stderr, d, hint)
	}
	switch d {
	case coordinator.PermissionDenied, coordinator.Unauthenticated, coordinator.AuthorityUnavailable, coordinator.OutcomeUnknown:
		if strings.Contains(hint, "etcd") {
			t.Fatalf("through the gateway, the hint %q blames etcd", hint)
		}
	default:
		if hint != d.Hint() && !strings.HasPrefix(r.stderr, string(d)+": etcd no longer knows this lease") {
			t.Fatalf("hint %q, want %s's own", hint, d)
		}
	}
	return obj
}
