package drill_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/drill"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/ledger"
)

// TestRealFencedWorkersHoldNoProviderCredential runs a real-provider
// trial of each design and looks at every worker process as the drill
// starts it: its argv, its environment, and every file its environment
// names (the spec's paths among them). No fenced worker's holds the
// PostgreSQL password or the TSIG secret — it is given the gateway's
// address, the CA and its own certificate, and reaches the servers through
// `leasegate serve --config` — and the fenced trial passes. The naive
// design's workers, which call the servers themselves, are given the
// credentials: the same look finds them there (the check can see a
// credential when one is handed over).
func TestRealFencedWorkersHoldNoProviderCredential(t *testing.T) {
	p := realProviders(t)
	secrets := drill.ProviderSecrets(t, p)
	var mu sync.Mutex
	found := map[drill.Design][]string{}
	started := map[drill.Design]int{}
	drill.OnRealWorkerStarted(t, func(d drill.Design, pid int) {
		where := credentialsOf(pid, secrets)
		mu.Lock()
		defer mu.Unlock()
		started[d]++
		found[d] = append(found[d], where...)
	})
	cli := embedtest.NewCluster(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := drill.Run(ctx, cli, drill.WithRealProviders(p), drill.WithTrials(1), drill.WithSeed(3), drill.WithPrefix("/cred"))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if started[drill.Fenced] < 2 || started[drill.Naive] < 2 {
		t.Fatalf("worker processes started: %v, want both workers of each design", started)
	}
	if len(found[drill.Fenced]) > 0 {
		t.Errorf("fenced worker processes hold a provider credential: %q", found[drill.Fenced])
	}
	if len(found[drill.Naive]) == 0 {
		t.Errorf("no credential found in the naive workers, which are given them: the look sees nothing")
	}
	if f := rep.Designs[drill.Fenced]; f.TotalViolations != 0 {
		t.Errorf("the fenced trial has violations: %v", f.Violations)
	}
	// The world's commander decided, under its own certificate: every
	// approval in the ledger's journal names it, none a worker.
	coord, err := coordinator.New(ctx, cli, coordinator.WithPrefix("/cred/trials"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(coord)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := l.Journal(ctx, "drill-fenced", "incident-0")
	if err != nil {
		t.Fatal(err)
	}
	approvals := 0
	for _, tr := range ts {
		if tr.To != ledger.Authorized && tr.To != ledger.Rejected {
			continue
		}
		approvals++
		if tr.Approver != "spiffe://leasegate.drill/incident-commander" {
			t.Errorf("%s %s by approver %q (owner %s), want the world's commander's identity", tr.Operation, tr.To, tr.Approver, tr.Owner)
		}
	}
	if approvals < 2 {
		t.Errorf("%d decisions in the journal, want the promotion's and the traffic change's", approvals)
	}
}

// credentialsOf says where process pid holds one of secrets: its argv,
// its environment, a file either names (a value that is a path, or a path
// in a JSON value).
func credentialsOf(pid int, secrets []string) []string {
	var out []string
	look := func(where string, b []byte) {
		for i, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				out = append(out, fmt.Sprintf("pid %d %s holds secret %d", pid, where, i))
			}
		}
	}
	var paths []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			paths = append(paths, v)
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for _, f := range []string{"cmdline", "environ"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
		if err != nil {
			out = append(out, fmt.Sprintf("pid %d: %v", pid, err)) // unread is not clean
			continue
		}
		look(f, b)
		for _, kv := range bytes.Split(b, []byte{0}) {
			_, v, _ := strings.Cut(string(kv), "=")
			paths = append(paths, v)
			var j any
			if json.Unmarshal([]byte(v), &j) == nil {
				walk(j)
			}
		}
	}
	for _, path := range paths {
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
			if b, err := os.ReadFile(path); err == nil {
				look("file "+path, b)
			}
		}
	}
	return out
}
