package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/realprov"
)

// TestDrillRealProvidersFlags: the flags of the simulated drill that a real
// run cannot honour, and an unknown --providers, are invalid input before
// anything starts (no server, no etcd).
func TestDrillRealProvidersFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--providers", "cloud"},
		{"--providers", "real", "--replay", "1"},
		{"--providers", "real", "--scenario", "incident"},
		{"--providers", "real", "--parallel", "4"},
		{"--providers", "real", "--svg", "x.svg"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := execApp(t, call{}, append([]string{"drill"}, args...)...)
			if r.code != cli.ExitInvalid || !strings.HasPrefix(r.stderr, "invalid_input: ") || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
				t.Fatalf("exit %d, want %d with one invalid_input line\nstdout: %s\nstderr: %s", r.code, cli.ExitInvalid, r.stdout, r.stderr)
			}
		})
	}
}

// TestDrillRealProvidersOneTrial runs one fenced trial of `leasegate drill
// --providers real` on the real servers and reads its report: the header
// names the providers and the reset cost, the fault table lists the real
// faults, and it passes.
func TestDrillRealProvidersOneTrial(t *testing.T) {
	realprov.Skip(t, realprov.HavePostgres)
	realprov.Skip(t, realprov.HaveBIND)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // longer than lgtest's: a real trial takes seconds
	defer cancel()
	r := execApp(t, call{ctx: ctx}, "drill", "--providers", "real", "--trials", "1", "--design", "fenced", "--seed", "3")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, s := range []string{"1 trials per design, 1 in parallel", "real providers (PostgreSQL 15 primary + standby, BIND 9)",
		"servers set up in", "fresh standby by pg_basebackup", "standby_stopped", "operator_dns_edit", "PASS: "} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("the report does not say %q:\n%s", s, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "lookup_outage") {
		t.Errorf("the report lists the simulated faults:\n%s", r.stdout)
	}
	r = execApp(t, call{ctx: ctx}, "drill", "--providers", "real", "--trials", "1", "--design", "fenced", "--seed", "3", "-o", "json")
	var rep struct {
		Pass    bool `json:"pass"`
		Servers struct {
			Setup  float64 `json:"setup_seconds"`
			Resets int     `json:"resets"`
		} `json:"servers"`
		Designs map[string]struct {
			Trials int `json:"trials"`
		} `json:"designs"`
	}
	decode(t, r, &rep)
	if r.code != 0 || !rep.Pass || rep.Servers.Setup <= 0 || rep.Servers.Resets != 1 || rep.Designs["fenced"].Trials != 1 {
		t.Fatalf("-o json: exit %d, %+v\n%s", r.code, rep, r.stdout)
	}
}

// TestDrillRealProvidersSecuredCluster runs one fenced real-provider trial
// on a cluster with client TLS (certificates required) and auth, given by
// --endpoints, --cacert/--cert/--key and --user/--password as a user whose
// role covers the leasegate prefix only: the worker processes, which dial
// etcd themselves, reach it with the same TLS files and login, and the
// trial passes.
func TestDrillRealProvidersSecuredCluster(t *testing.T) {
	realprov.Skip(t, realprov.HavePostgres)
	realprov.Skip(t, realprov.HaveBIND)
	cl := embedtest.NewCluster(t, embedtest.WithTLS(), embedtest.WithAuth("root-pw"))
	cl.AddPrefixUser(t, "drill", "drill-pw", coordinator.DefaultPrefix+"/")
	f := cl.TLSFiles()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // longer than lgtest's: a real trial takes seconds
	defer cancel()
	r := execApp(t, call{ctx: ctx}, "--endpoints", strings.Join(cl.Endpoints(), ","), "--cacert", f.CA, "--cert", f.ClientCert, "--key", f.ClientKey,
		"--user", "drill", "--password", "drill-pw",
		"drill", "--providers", "real", "--trials", "1", "--design", "fenced", "--seed", "3")
	if r.code != 0 || !strings.Contains(r.stdout, "PASS: ") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}
