package cli_test

import (
	"context"
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
)

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
