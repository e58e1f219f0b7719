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

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/api/leasegate/v1/leasegatev1connect"
	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/ledger"
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
	// The gateway frees the stream's unit of w1's watch limit as its
	// handler returns, after the client saw the stream end: wait for it.
	waitNoKeys(t, e.client(), e.prefix+"/limits/watches/")

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

// lease revoke and realm show print through the gateway what they print
// through --endpoints: the tasks a revoke vacated and what was left of the
// lease, the realm's recorded origin.
func TestOperatorAnswersThroughTheGatewayMatchEndpoints(t *testing.T) {
	var lose atomic.Bool
	gw := newGatewayEnvWrapped(t, loseAnswers(&lose, leasegatev1connect.OperatorServiceRevokeLeaseProcedure))
	e := gw.env

	direct := e.lg(t, "realm", "show")
	want(t, direct, 0, coordinator.OK)
	via := gw.as(t, "op1", "realm", "show")
	wantViaGateway(t, via, 0, coordinator.OK)
	if lastJSON(t, via.stdout)["origin"] == nil {
		t.Fatalf("realm show through the gateway has no origin: %s", via.stdout)
	}
	sameJSON(t, direct, via)

	// Two leases of the same shape, one revoked each way.
	_, g1 := e.claim(t, "acme", "a", "w1", "30s")
	_, g2 := e.claim(t, "acme", "b", "w1", "30s")
	direct = e.lg(t, "lease", "revoke", "--grant", g1)
	want(t, direct, 0, coordinator.OK)
	via = gw.as(t, "op1", "lease", "revoke", "--grant", g2)
	wantViaGateway(t, via, 0, coordinator.OK)
	if v := lastJSON(t, via.stdout)["vacated"].([]any); len(v) != 1 || v[0].(map[string]any)["task"] != "b" {
		t.Fatalf("revoke through the gateway vacated %v, want acme/b", v)
	}
	if left := lastJSON(t, via.stdout)["ttl_left_seconds"].(float64); left <= 0 {
		t.Fatalf("revoke through the gateway: %v seconds left", left)
	}
	direct.stdout = strings.Replace(direct.stdout, `"task":"a"`, `"task":"b"`, 1)
	sameJSON(t, direct, via, "lease", "ttl_left_seconds")

	// The table says the same.
	_, g3 := e.claim(t, "acme", "c", "w1", "30s")
	r := execApp(t, call{}, append(gw.gatewayArgs("op1", gw.url), "-o", "table", "lease", "revoke", "--grant", g3)...)
	if r.code != 0 || !strings.Contains(r.stdout, "acme/c") || !strings.Contains(r.stdout, "were left") {
		t.Fatalf("table: %+v", r)
	}

	// An unreachable gateway is a hold; a revoke whose answer was lost may
	// have applied (outcome_unknown), and revoking again tells.
	for _, args := range [][]string{{"realm", "show"}, {"lease", "revoke", "--grant", g3}} {
		wantViaGateway(t, execApp(t, call{}, append(gw.gatewayArgs("op1", "https://127.0.0.1:1"), args...)...), cli.ExitUnavailable, coordinator.AuthorityUnavailable)
	}
	_, g4 := e.claim(t, "acme", "d", "w1", "30s")
	lose.Store(true)
	wantViaGateway(t, gw.as(t, "op1", "lease", "revoke", "--grant", g4), cli.ExitOutcomeUnknown, coordinator.OutcomeUnknown)
	lose.Store(false)
	wantOperatorAdvice(t, gw.as(t, "op1", "lease", "revoke", "--grant", g4), cli.ExitRefused, coordinator.ExpiredOwner, "etcd no longer knows this lease")
}

// ops show of an UNKNOWN record (the provider call may have applied) prints
// through the gateway exactly what it prints through --endpoints, JSON and
// table, and neither claims that nothing was sent; an operation that is
// not recorded is invalid_input both ways.
func TestOpsShowOfAnUnknownRecordThroughTheGateway(t *testing.T) {
	gw := newGatewayEnv(t)
	e := gw.env
	ctx := lgtest.Ctx(t)
	g, _ := e.claim(t, "acme", "failover", gw.certs.IDs["w1"], "30s")
	p := &dbProvider{lose: true}
	l, err := ledger.New(e.co, ledger.WithAdapters(p), ledger.WithPolling(time.Millisecond, time.Millisecond, 1))
	if err != nil {
		t.Fatal(err)
	}
	pre, _ := p.Precondition(ctx, ledger.Effect{})
	rec, err := l.Propose(ctx, g, "promote", ledger.Effect{Kind: "db-promote", Target: "db-b", Policy: "p7"}, pre)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Authorize(ctx, g, "promote", ledger.Approval{Approver: "darius", ParamsDigest: rec.ParamsDigest,
		PreconditionDigest: rec.Precondition.Digest}); err != nil {
		t.Fatal(err)
	}
	if rec, _ = l.Dispatch(ctx, g, "promote"); rec.State != ledger.Unknown {
		t.Fatalf("dispatch left %s, want UNKNOWN", rec.State)
	}
	for _, args := range [][]string{
		{"ops", "show", "--tenant", "acme", "--task", "failover", "promote"},
		{"-o", "table", "ops", "show", "--tenant", "acme", "--task", "failover", "promote"},
	} {
		direct, via := e.lg(t, args...), gw.as(t, "w1", args...)
		if direct.code != 0 || via != direct {
			t.Fatalf("ops show %v:\n--endpoints %+v\n--gateway   %+v", args, direct, via)
		}
		if strings.Contains(via.stdout+via.stderr, "nothing was sent") || !strings.Contains(via.stdout, "UNKNOWN") {
			t.Fatalf("ops show of an UNKNOWN record: %+v", via)
		}
	}
	args := []string{"ops", "show", "--tenant", "acme", "--task", "failover", "never-proposed"}
	direct, via := e.lg(t, args...), gw.as(t, "w1", args...)
	want(t, direct, 2, coordinator.InvalidInput)
	wantViaGateway(t, via, 2, coordinator.InvalidInput)
	if direct.stderr != via.stderr {
		t.Fatalf("not recorded:\n--endpoints %s--gateway   %s", direct.stderr, via.stderr)
	}
}

// renew, list, lease list and lease show through the gateway print what
// they print through --endpoints; the gateway's roles decide who may (a
// worker lists its tenants' tasks and renews its own grants; lease list
// needs an operator of every tenant, lease show one of the lease's
// tenants); gc is refused naming --endpoints. Bad input is refused before
// any I/O, an unreachable gateway is a hold, a renew whose answer was lost
// is outcome_unknown and a read's is a hold.
func TestRenewListAndLeasesThroughTheGatewayMatchEndpoints(t *testing.T) {
	lost := []string{leasegatev1connect.WorkerServiceRenewGrantProcedure, leasegatev1connect.WorkerServiceListTasksProcedure}
	var lose atomic.Bool
	gw := newGatewayEnvWrapped(t, loseAnswers(&lose, lost...))
	e := gw.env
	w1 := gw.certs.IDs["w1"]
	g1, f1 := e.claim(t, "acme", "a", w1, "30s")
	_, f2 := e.claim(t, "acme", "b", "someone-else", "30s")
	_, fo := e.claim(t, "other", "x", "w-other", "30s")
	lease := coordinator.FormatLeaseID(g1.Lease)

	for _, tc := range []struct {
		name   string
		who    string
		args   []string
		code   int
		d      coordinator.Disposition
		ignore []string // fields that may differ between the two runs
	}{
		{"renew", "w1", []string{"renew", "--grant", f1}, 0, coordinator.Renewed, nil},
		{"list of a tenant", "w1", []string{"list", "--tenant", "acme"}, 0, coordinator.OK, []string{"ttl_left_seconds"}},
		{"list of every tenant", "op1", []string{"list"}, 0, coordinator.OK, []string{"ttl_left_seconds"}},
		{"lease list", "op1", []string{"lease", "list"}, 0, coordinator.OK, []string{"ttl_left_seconds"}},
		{"lease show", "op1", []string{"lease", "show", lease}, 0, coordinator.OK, []string{"ttl_left_seconds"}},
		{"lease show by an operator of the lease's tenant", "op2", []string{"lease", "show", "--grant", f1}, 0, coordinator.OK, []string{"ttl_left_seconds"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			direct, via := e.lg(t, tc.args...), gw.as(t, tc.who, tc.args...)
			want(t, direct, tc.code, tc.d)
			wantViaGateway(t, via, tc.code, tc.d)
			sameJSON(t, direct, via, tc.ignore...)
		})
	}

	// Refused by the gateway's roles, or before any I/O; nothing written.
	e.writesNothing(t, "a refused command", func() {
		for _, tc := range []struct {
			name string
			who  string
			args []string
			code int
			d    coordinator.Disposition
		}{
			{"renew of another identity's grant", "w1", []string{"renew", "--grant", f2}, cli.ExitDenied, coordinator.PermissionDenied},
			{"list of another tenant", "w1", []string{"list", "--tenant", "other"}, cli.ExitDenied, coordinator.PermissionDenied},
			{"list of every tenant by a worker of one", "w1", []string{"list"}, cli.ExitInvalid, coordinator.InvalidInput},
			{"lease list by a worker", "w1", []string{"lease", "list"}, cli.ExitDenied, coordinator.PermissionDenied},
			{"lease list by an operator of one tenant", "op2", []string{"lease", "list"}, cli.ExitDenied, coordinator.PermissionDenied},
			{"lease show of another tenant's lease", "op2", []string{"lease", "show", "--grant", fo}, cli.ExitDenied, coordinator.PermissionDenied},
			{"lease show of a malformed ID", "op1", []string{"lease", "show", "xyz"}, cli.ExitInvalid, coordinator.InvalidInput},
			{"gc", "op1", []string{"gc"}, cli.ExitInvalid, coordinator.InvalidInput},
			{"gc --apply", "op1", []string{"gc", "--apply"}, cli.ExitInvalid, coordinator.InvalidInput},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := gw.as(t, tc.who, tc.args...)
				wantViaGateway(t, r, tc.code, tc.d)
				if tc.args[0] == "gc" && !strings.Contains(r.stderr, "--endpoints") {
					t.Fatalf("gc's refusal does not name --endpoints: %s", r.stderr)
				}
			})
		}
	})

	// A lease etcd no longer knows: expired_owner, with the operator's advice, both ways.
	want(t, e.lg(t, "lease", "revoke", "--grant", f1), 0, coordinator.OK)
	advice := "etcd no longer knows this lease"
	wantOperatorAdvice(t, e.lg(t, "lease", "show", lease), cli.ExitRefused, coordinator.ExpiredOwner, advice)
	wantOperatorAdvice(t, gw.as(t, "op1", "lease", "show", lease), cli.ExitRefused, coordinator.ExpiredOwner, advice)
	want(t, e.lg(t, "renew", "--grant", f1), cli.ExitRefused, coordinator.ExpiredOwner)
	wantViaGateway(t, gw.as(t, "w1", "renew", "--grant", f1), cli.ExitRefused, coordinator.ExpiredOwner)

	// An unreachable gateway is a hold for every one of them.
	down := execApp(t, call{}, append(gw.gatewayArgs("w1", "https://127.0.0.1:1"), "renew", "--grant", f1)...)
	wantViaGateway(t, down, cli.ExitUnavailable, coordinator.AuthorityUnavailable)
	for _, args := range [][]string{{"list", "--tenant", "acme"}, {"lease", "list"}, {"lease", "show", lease}} {
		wantViaGateway(t, execApp(t, call{}, append(gw.gatewayArgs("op1", "https://127.0.0.1:1"), args...)...), cli.ExitUnavailable, coordinator.AuthorityUnavailable)
	}

	// A renew whose answer was lost may have applied: outcome_unknown; a
	// read whose answer was lost changed nothing: a hold.
	_, f3 := e.claim(t, "acme", "c", w1, "30s")
	lose.Store(true)
	wantViaGateway(t, gw.as(t, "w1", "renew", "--grant", f3), cli.ExitOutcomeUnknown, coordinator.OutcomeUnknown)
	wantViaGateway(t, gw.as(t, "w1", "list", "--tenant", "acme"), cli.ExitUnavailable, coordinator.AuthorityUnavailable)
}

// The worker's commands answer through the gateway in the shape they
// answer through --endpoints (-o json), each on a task of its own: claim,
// commit (and its retry), get, status, ops list, release, and a refusal.
func TestWorkerAnswersThroughTheGatewayMatchEndpoints(t *testing.T) {
	gw := newGatewayEnv(t)
	e := gw.env
	w1 := gw.certs.IDs["w1"]
	both := func(d coordinator.Disposition, code int, direct, via []string) {
		t.Helper()
		a, b := e.lg(t, direct...), gw.as(t, "w1", via...)
		want(t, a, code, d)
		wantViaGateway(t, b, code, d)
		sameShape(t, a, b)
	}
	a, b := e.lg(t, "claim", "--tenant", "acme", "--task", "a", "--owner", w1, "--ttl", "30s"),
		gw.as(t, "w1", "claim", "--tenant", "acme", "--task", "b", "--ttl", "30s")
	want(t, a, 0, coordinator.Granted)
	want(t, b, 0, coordinator.Granted)
	sameShape(t, a, b)
	sameJSON(t, a, b, "task", "lease", "epoch")
	ga, gb := e.file(t, a.stdout), e.file(t, b.stdout)
	commit := func(g string) []string {
		return []string{"commit", "--grant", g, "--operation", "op-1", "--value", "paid", "--expected-version", "0"}
	}
	both(coordinator.Committed, 0, commit(ga), commit(gb))
	both(coordinator.HistoricalRetry, 0, commit(ga), commit(gb))
	for _, args := range [][]string{{"get", "--tenant", "acme", "--task"}, {"status", "--tenant", "acme", "--task"}} {
		both(coordinator.OK, 0, append(args, "a"), append(args, "b"))
	}
	both(coordinator.OK, 0, []string{"ops", "list", "--tenant", "acme"}, []string{"ops", "list", "--tenant", "acme"})
	both(coordinator.Released, 0, []string{"release", "--grant", ga}, []string{"release", "--grant", gb})
	late := func(g string) []string {
		return []string{"commit", "--grant", g, "--operation", "op-2", "--value", "late", "--expected-version", "1"}
	}
	both(coordinator.ExpiredOwner, 1, late(ga), late(gb))
}

// waitNoKeys waits, on a watch, until no key is left under prefix.
func waitNoKeys(t *testing.T, cli *clientv3.Client, prefix string) {
	t.Helper()
	ctx := lgtest.Ctx(t)
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	left := resp.Count
	if left == 0 {
		return
	}
	for wr := range cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				left--
			} else if ev.IsCreate() {
				left++
			}
		}
		if left == 0 {
			return
		}
	}
	t.Fatalf("keys still under %s: %v", prefix, ctx.Err())
}
