package ledger

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// BenchmarkTransitionBuild is the client side of one ledger transition
// without the round trip to etcd (`leasegate bench`'s ledger-dispatch
// variant measures that): the table's check, the new record and its
// journal entry encoded, the grant's guard and the record's compare.
func BenchmarkTransitionBuild(b *testing.B) {
	cl := embedtest.NewCluster(b)
	c := lgtest.Coordinator(b, cl)
	g := lgtest.Claim(b, lgtest.Session(b, c, "worker-1", 10*time.Second), "tenant-a", "incident-42")
	l, err := New(c)
	if err != nil {
		b.Fatal(err)
	}
	rec := Record{Tenant: g.Tenant, Task: g.Task, Operation: "promote-db-2026-11-30", State: Authorized,
		Effect:       Effect{Kind: "db.promote", Target: "cluster-b", Params: json.RawMessage(`{"max_loss_s":5}`), Policy: "v3"},
		ParamsDigest: "sha256:0f", Precondition: Observation{Digest: "sha256:1e", At: time.Unix(1e9, 0)},
		ProposedEpoch: g.Epoch, Seq: 2, Revision: g.Epoch + 2}
	ch := change{to: Dispatching, by: StepDispatch, reason: "dispatch claimed"}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := l.build(g, rec, ch); err != nil {
			b.Fatal(err)
		}
	}
}
