package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasegate/leasegate/client"
	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/gateway"
	"github.com/leasegate/leasegate/gateway/devprovider"
	"github.com/leasegate/leasegate/ledger"
)

// benchWorld is newWorld for a benchmark: one etcd member with fsync on, as
// a real one has.
func benchWorld(b *testing.B) *world {
	b.Helper()
	cl := embedtest.NewCluster(b, embedtest.WithFsync())
	certs, err := gateway.WriteDevCerts(b.TempDir(), trustDomain, callers...)
	if err != nil {
		b.Fatal(err)
	}
	w := &world{t: b, cl: cl, etcd: cl.Client(b), certs: certs, provider: devprovider.New("db-1"),
		key: []byte("0123456789abcdef0123456789abcdef")}
	w.ids = []gateway.Identity{
		{ID: certs.IDs["worker-a"], Roles: []gateway.Role{gateway.RoleWorker}, Tenants: []string{gateway.AllTenants}},
		{ID: certs.IDs["approver"], Roles: []gateway.Role{gateway.RoleApprover}, Tenants: []string{gateway.AllTenants}},
	}
	return w
}

// BenchmarkCommit compares protected commits in-process (fencedtxn.Commit on
// the worker's own coordinator) with the same commits through the gateway
// (the Go client over loopback TLS), at 16 and 64 concurrent workers, each
// committing to its own task. Run both in one go:
//
//	go test -run '^$' -bench 'BenchmarkCommit|BenchmarkDispatch' -benchtime 5s ./gateway
func BenchmarkCommit(b *testing.B) {
	w := benchWorld(b)
	r := w.replica()
	c := r.c
	gw := w.client(r, "worker-a")
	var seq atomic.Int64
	for _, workers := range []int{16, 64} {
		for _, via := range []string{"in-process", "gateway"} {
			b.Run(fmt.Sprintf("workers=%d/%s", workers, via), func(b *testing.B) {
				ctx := context.Background()
				b.SetParallelism(max(1, workers/runtime.GOMAXPROCS(0)))
				var sess *coordinator.Session
				var gs interface {
					Claim(context.Context, string, string) (coordinator.Grant, error)
				}
				if via == "in-process" {
					s, err := c.NewSession(ctx, w.certs.IDs["worker-a"], 30*time.Second)
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close(ctx)
					sess, gs = s, s
				} else {
					s, err := gw.OpenSession(ctx, 30*time.Second, client.WithKeepAlive())
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close(ctx)
					gs = s
				}
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					task := fmt.Sprintf("bench-%d", seq.Add(1))
					g, err := gs.Claim(ctx, "bench", task)
					if err != nil {
						b.Error(err)
						return
					}
					for v := int64(0); pb.Next(); v++ {
						in := fencedtxn.Intent{Tenant: "bench", Task: task, Operation: fmt.Sprintf("op-%d", v), Value: []byte("v"), ExpectedVersion: v}
						if via == "in-process" {
							_, err = fencedtxn.Commit(ctx, c, g, in, fencedtxn.WithSession(sess))
						} else {
							_, err = gw.Commit(ctx, g, in)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			})
		}
	}
}

// BenchmarkDispatch compares one dispatch (fenced read, revalidation,
// claim Txn, provider call, recorded outcome) in-process (ledger.Dispatch)
// with the same through the gateway. Proposal and approval are outside the
// timer.
func BenchmarkDispatch(b *testing.B) {
	w := benchWorld(b)
	r := w.replica()
	led, err := ledger.New(r.c, ledger.WithAdapters(w.provider.Adapters()...))
	if err != nil {
		b.Fatal(err)
	}
	gw, ap := w.client(r, "worker-a"), w.client(r, "approver")
	ctx := context.Background()
	s, err := gw.OpenSession(ctx, 30*time.Second, client.WithKeepAlive())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(ctx)
	var opSeq atomic.Int64
	for _, via := range []string{"in-process", "gateway"} {
		b.Run(via, func(b *testing.B) {
			g, err := s.Claim(ctx, "bench", "dispatch-"+via)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				op := fmt.Sprintf("op-%d", opSeq.Add(1))
				rec, err := gw.Propose(ctx, g, op, ledger.Effect{Kind: devprovider.KindDNS, Target: "bench.example",
					Params: json.RawMessage(fmt.Sprintf(`{"value":"%s"}`, op)), Policy: "v1"},
					ledger.Observation{Digest: devprovider.Digest("db-1"), At: time.Now()})
				if err == nil {
					_, err = ap.Authorize(ctx, "bench", g.Task, op, ledger.Approval{ParamsDigest: rec.ParamsDigest, PreconditionDigest: rec.Precondition.Digest, Note: ""})
				}
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if via == "in-process" {
					rec, err = led.Dispatch(ctx, g, op)
				} else {
					rec, err = gw.Dispatch(ctx, g, op)
				}
				if err != nil || rec.State != ledger.Confirmed {
					b.Fatalf("dispatch: %v, %s", err, rec.State)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "dispatches/s")
		})
	}
}

// BenchmarkLimits measures what the per-identity limits cost a worker's
// calls through the gateway: opening and closing a session, and claiming
// and releasing a task on one, each with the limits counted in etcd and
// on a server that counts none, in one run (one worker, fsync on):
//
//	go test -run '^$' -bench BenchmarkLimits -count 5 ./gateway
func BenchmarkLimits(b *testing.B) {
	w := benchWorld(b)
	for _, counted := range []bool{true, false} {
		var opts []gateway.Option
		name := "limits"
		if !counted {
			opts, name = append(opts, gateway.WithoutLimits()), "none"
		}
		r := w.replica(opts...)
		gw := w.client(r, "worker-a")
		ctx := context.Background()
		b.Run("open-close/"+name, func(b *testing.B) {
			for b.Loop() {
				s, err := gw.OpenSession(ctx, 30*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Close(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("claim-release/"+name, func(b *testing.B) {
			s, err := gw.OpenSession(ctx, 30*time.Second, client.WithKeepAlive())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(ctx)
			for b.Loop() {
				g, err := s.Claim(ctx, "bench", "limits")
				if err != nil {
					b.Fatal(err)
				}
				if err := gw.Release(ctx, g); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
