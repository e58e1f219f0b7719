package cli_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/leasegate/leasegate/cli"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/internal/store"
)

// TestExitCodeOfEveryDisposition: each disposition maps to its class's
// code, and an error that names none is never done or refused.
func TestExitCodeOfEveryDisposition(t *testing.T) {
	t.Parallel()
	want := map[coordinator.Class]int{
		coordinator.ClassDone:           cli.ExitDone,
		coordinator.ClassRefused:        cli.ExitRefused,
		coordinator.ClassInvalid:        cli.ExitInvalid,
		coordinator.ClassUnavailable:    cli.ExitUnavailable,
		coordinator.ClassOutcomeUnknown: cli.ExitOutcomeUnknown,
		coordinator.ClassDenied:         cli.ExitDenied,
		coordinator.ClassNotFound:       cli.ExitNotFound,
	}
	for _, d := range coordinator.Dispositions() {
		if d.Class() == coordinator.ClassDone {
			continue // done is a nil error
		}
		t.Run(string(d), func(t *testing.T) {
			err := fmt.Errorf("wrapped: %w", store.NewError(d, "test", "", "", "", nil))
			if got := cli.ExitCode(err); got != want[d.Class()] {
				t.Fatalf("ExitCode(%s) = %d, want %d", d, got, want[d.Class()])
			}
		})
	}
	if got := cli.ExitCode(nil); got != cli.ExitDone {
		t.Fatalf("ExitCode(nil) = %d", got)
	}
	if got := cli.ExitCode(errors.New("something else")); got != cli.ExitOutcomeUnknown {
		t.Fatalf("ExitCode(unknown error) = %d, want %d", got, cli.ExitOutcomeUnknown)
	}
}

// TestBadInputExits2BeforeAnyIO: every kind of bad input exits 2 with
// invalid_input, one line on stderr, and the keyspace unchanged — on a
// prefix where nothing was ever written, so that even the realm's creation
// would show.
func TestBadInputExits2BeforeAnyIO(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g, grant := e.claim(t, "tenant", "task", "owner", "10s")
	e.prefix += "-untouched"
	if s := e.snap(t); len(s) != 0 {
		t.Fatalf("prefix %s not empty: %v", e.prefix, s)
	}
	noEpoch, unknownField := g, e.file(t, strings.Replace(readFile(t, grant), `"owner"`, `"ownr"`, 1))
	noEpoch.Epoch = 0
	busy := e.file(t, `{"disposition":"busy","grant":{}}`)
	long := strings.Repeat("x", coordinator.MaxLabelLen+1)
	cases := []struct {
		name string
		args []string
	}{
		{"label with a space", []string{"claim", "--tenant", "a b", "--task", "k", "--owner", "o"}},
		{"label too long", []string{"claim", "--tenant", long, "--task", "k", "--owner", "o"}},
		{"non-ASCII label", []string{"status", "--tenant", "t", "--task", "tâche"}},
		{"missing owner", []string{"claim", "--tenant", "t", "--task", "k"}},
		{"fractional ttl", []string{"claim", "--tenant", "t", "--task", "k", "--owner", "o", "--ttl", "1500ms"}},
		{"zero ttl", []string{"claim", "--tenant", "t", "--task", "k", "--owner", "o", "--ttl", "0s"}},
		{"ttl over 24h", []string{"claim", "--tenant", "t", "--task", "k", "--owner", "o", "--ttl", "25h"}},
		{"negative ttl", []string{"run", "--tenant", "t", "--task", "k", "--owner", "o", "--ttl", "-2s", "--", "true"}},
		{"unparsable ttl", []string{"claim", "--tenant", "t", "--task", "k", "--owner", "o", "--ttl", "soon"}},
		{"negative version", []string{"commit", "--grant", grant, "--operation", "op", "--expected-version", "-1"}},
		{"missing version", []string{"commit", "--grant", grant, "--operation", "op"}},
		{"missing operation", []string{"commit", "--grant", grant, "--expected-version", "0"}},
		{"unparsable grant", []string{"commit", "--grant", e.file(t, "{not json"), "--operation", "op", "--expected-version", "0"}},
		{"grant with a misspelt field", []string{"renew", "--grant", unknownField}},
		{"grant without epoch", []string{"release", "--grant", e.grantFile(t, noEpoch)}},
		{"a busy answer is no grant", []string{"release", "--grant", busy}},
		{"missing grant file", []string{"renew", "--grant", e.dir + "/nope"}},
		{"no grant", []string{"renew"}},
		{"oversized value", []string{"commit", "--grant", grant, "--operation", "op", "--expected-version", "0", "--value", strings.Repeat("v", 256<<10+1)}},
		{"commit without a value", []string{"commit", "--grant", grant, "--operation", "op", "--expected-version", "0"}},
		{"value and value-file", []string{"commit", "--grant", grant, "--operation", "op", "--expected-version", "0", "--value", "v", "--value-file", grant}},
		{"missing value file", []string{"commit", "--grant", grant, "--operation", "op", "--expected-version", "0", "--value-file", e.dir + "/nope"}},
		{"oversized value file", []string{"commit", "--grant", grant, "--operation", "op", "--expected-version", "0", "--value-file", e.file(t, strings.Repeat("v", 256<<10+1))}},
		{"grant and value both from stdin", []string{"commit", "--grant", "-", "--operation", "op", "--expected-version", "0", "--value-file", "-"}},
		{"wait-timeout without wait", []string{"run", "--tenant", "t", "--task", "k", "--owner", "o", "--wait-timeout", "1s", "--", "true"}},
		{"negative wait-timeout", []string{"run", "--tenant", "t", "--task", "k", "--owner", "o", "--wait", "--wait-timeout", "-1s", "--", "true"}},
		{"bad lease id", []string{"lease", "revoke", "--lease", "xyz"}},
		{"negative lease id", []string{"lease", "revoke", "--lease", "-5"}},
		{"run without a command", []string{"run", "--tenant", "t", "--task", "k", "--owner", "o"}},
		{"run of a missing program", []string{"run", "--tenant", "t", "--task", "k", "--owner", "o", "--", "/nonexistent/prog"}},
		{"negative kill-after", []string{"run", "--tenant", "t", "--task", "k", "--owner", "o", "--kill-after", "-1s", "--", "true"}},
		{"unknown flag", []string{"claim", "--tenant", "t", "--task", "k", "--owner", "o", "--bogus"}},
		{"unknown command", []string{"frobnicate"}},
		{"unknown subcommand", []string{"realm", "frob"}},
		{"help for an unknown command", []string{"help", "frob"}},
		{"stray argument", []string{"list", "extra"}},
		{"bad output format after the command", []string{"list", "-o", "yaml"}},
		{"bad listen URL", []string{"etcd", "--listen-client", "127.0.0.1:2379"}},
	}
	globals := []struct {
		name string
		args []string
	}{
		{"bad output format", []string{"-o", "yaml"}},
		{"bad log level", []string{"--log-level", "loud"}},
		{"bad prefix", []string{"--prefix", "no-slash"}},
		{"bad endpoint", []string{"--endpoints", "not an endpoint"}},
		{"cert without key", []string{"--cert", grant}},
		{"unreadable CA", []string{"--cacert", e.dir + "/nope"}},
		{"password without user", []string{"--password", "pw"}},
		{"user without password", []string{"--user", "root"}},
		{"zero dial timeout", []string{"--dial-timeout", "0s"}},
	}
	// The group returns when its parallel subtests are done.
	e.writesNothing(t, "bad input", func() {
		t.Run("group", func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					r := e.lg(t, tc.args...)
					want(t, r, cli.ExitInvalid, coordinator.InvalidInput)
				})
			}
			for _, tc := range globals {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					args := append([]string{"--endpoints", strings.Join(e.endpoints, ","), "--prefix", e.prefix}, tc.args...)
					r := execApp(t, call{}, append(args, "list")...)
					if r.code != cli.ExitInvalid || r.stdout != "" {
						t.Fatalf("exit %d, want 2; stdout %q", r.code, r.stdout)
					}
					wantRefusalLine(t, r, coordinator.InvalidInput)
				})
			}
		})
	})
}

// TestUnavailableExits3: with etcd unreachable every command holds with
// authority_unavailable — never a refusal — and one line on stderr.
func TestUnavailableExits3(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, grant := e.claim(t, "tenant", "task", "owner", "10s")
	dead := &env{endpoints: []string{deadEndpoint(t)}, prefix: e.prefix}
	for _, args := range [][]string{
		{"claim", "--tenant", "t", "--task", "k", "--owner", "o"},
		{"renew", "--grant", grant},
		{"release", "--grant", grant},
		{"commit", "--grant", grant, "--operation", "op", "--value", "v", "--expected-version", "0"},
		{"status", "--tenant", "t", "--task", "k"},
		{"list"},
		{"watch"},
		{"lease", "revoke", "--lease", "1"},
		{"realm", "show"},
		{"realm", "rotate"},
		{"run", "--tenant", "t", "--task", "k", "--owner", "o", "--", "true"},
	} {
		t.Run(strings.Join(args[:min(2, len(args))], " "), func(t *testing.T) {
			t.Parallel()
			r := dead.lg(t, append([]string{"--dial-timeout", "300ms"}, args...)...)
			want(t, r, cli.ExitUnavailable, coordinator.AuthorityUnavailable)
		})
	}
}

// TestOutcomeUnknownExits4 produces outcome_unknown honestly, through the
// CLI: etcd applies the commit's Txn, then its answer is lost (the server
// holds it until the client's --command-timeout passes). The CLI cannot
// know whether it applied: exit 4. Retrying the same intent learns that it
// did: historical_retry with the original receipt.
func TestOutcomeUnknownExits4(t *testing.T) {
	t.Parallel()
	var dropped atomic.Bool
	loseAnswer := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if txn, isTxn := req.(*pb.TxnRequest); isTxn && err == nil && writesState(txn) && dropped.CompareAndSwap(false, true) {
			<-ctx.Done() // applied; the answer never leaves
			return nil, ctx.Err()
		}
		return resp, err
	}
	e := newEnvAt(t, startEtcd(t, grpc.ChainUnaryInterceptor(loseAnswer)))
	_, grant := e.claim(t, "tenant", "task", "owner", "10s")
	commit := []string{"commit", "--grant", grant, "--operation", "op-1", "--value", "v", "--expected-version", "0"}

	r := e.lg(t, append([]string{"--command-timeout", "1s"}, commit...)...)
	want(t, r, cli.ExitOutcomeUnknown, coordinator.OutcomeUnknown)
	if !dropped.Load() {
		t.Fatal("the commit's answer was not the one dropped")
	}

	r = e.lg(t, commit...)
	want(t, r, cli.ExitDone, coordinator.HistoricalRetry)
	var rec fencedtxn.Receipt
	decode(t, r, &rec)
	if rec.CommittedVersion != 1 || rec.Operation != "op-1" {
		t.Fatalf("retry receipt %+v", rec)
	}
}

// writesState reports whether a Txn puts a protected state key: a commit.
func writesState(txn *pb.TxnRequest) bool {
	for _, op := range txn.Success {
		if put := op.GetRequestPut(); put != nil && strings.Contains(string(put.Key), "/state/") {
			return true
		}
	}
	return false
}

// startEtcd starts one etcd member on free loopback ports with extra gRPC
// server options, and returns its client URL.
func startEtcd(t *testing.T, opts ...grpc.ServerOption) string {
	t.Helper()
	any0 := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg := embed.NewConfig()
	cfg.Name = "unknown"
	cfg.Dir = t.TempDir()
	cfg.TickMs, cfg.ElectionMs = 50, 500
	cfg.UnsafeNoFsync = true
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{any0}, []url.URL{any0}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{any0}, []url.URL{any0}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.GRPCAdditionalServerOptions = opts
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatal(err)
	case <-time.After(20 * time.Second):
		t.Fatal("etcd not ready")
	}
	return "http://" + e.Clients[0].Addr().String()
}
