package coordinator_test

import (
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestZeroLeaseAndFullMarginAreInvalidInput: lease 0 is no lease (a grant
// of lease 0, RevokeLease(0), Lease(0)) and a margin as long as the TTL
// leaves no time to act: each is invalid_input, refused before any I/O,
// nothing written (pinned for indep/grant/lease-zero-valid,
// indep/revoke/zero-lease, indep/lease/zero-id,
// indep/session/margin-equal-ttl).
func TestZeroLeaseAndFullMarginAreInvalidInput(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "zero")
	zero := g
	zero.Lease = 0
	for name, f := range map[string]func() error{
		"renew a grant of lease 0":   func() error { return c.Renew(ctx, zero) },
		"release a grant of lease 0": func() error { return c.Release(ctx, zero) },
		"current of lease 0":         func() error { return c.Current(ctx, zero) },
		"revoke lease 0":             func() error { return c.RevokeLease(ctx, 0) },
		"show lease 0":               func() error { _, err := c.Lease(ctx, 0); return err },
		"a margin equal to the ttl": func() error {
			_, err := c.NewSession(ctx, "worker", 2*time.Second, coordinator.WithMargin(2*time.Second))
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, c.Client(), c.Keys().Prefix(), coordinator.InvalidInput, f)
		})
	}
}

// TestTxnLimitsCountWhatEtcdCounts: a put of the end key of a ranged
// delete in the same branch does not overlap it (etcd's range end is
// exclusive) and is sent; the size limit counts the Else ops too, so a Txn
// whose Else alone is over it is invalid_input before any I/O (pinned for
// indep/limits/range-end-inclusive, indep/limits/size-else-uncounted).
func TestTxnLimitsCountWhatEtcdCounts(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl, coordinator.WithMaxRequestBytes(4096))
	ctx := lgtest.Ctx(t)
	t.Run("put of a ranged delete's end key", func(t *testing.T) {
		_, err := store.Of(c).Txn(ctx, store.TxnRequest{Op: "test", Then: []clientv3.Op{
			clientv3.OpDelete("/app/a", clientv3.WithRange("/app/b")),
			clientv3.OpPut("/app/b", "kept"),
		}})
		if err != nil {
			t.Fatalf("a put of the range's end key: %v; want it sent and applied", err)
		}
		if resp, err := c.Client().Get(ctx, "/app/b"); err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("/app/b after the Txn: %v %v", resp, err)
		}
	})
	t.Run("an Else over the size limit", func(t *testing.T) {
		lgtest.RefusedWritingNothing(t, c.Client(), "/", coordinator.InvalidInput, func() error {
			_, err := store.Of(c).Txn(ctx, store.TxnRequest{Op: "test",
				If:   []clientv3.Cmp{clientv3.Compare(clientv3.Version("/app/x"), "=", 0)},
				Then: []clientv3.Op{clientv3.OpPut("/app/x", "v")},
				Else: []clientv3.Op{clientv3.OpGet("/app/" + strings.Repeat("k", 5000))}})
			return err
		})
	})
}

// TestClaimDoesNotTakeAnotherLabelsKeyOnItsLease: an owner key on the
// session's lease that carries another owner label (written behind
// leasegate's back) is not this session's earlier claim: the claim is busy,
// not granted (pinned for indep/claim/retried-same-lease-any-owner).
func TestClaimDoesNotTakeAnotherLabelsKeyOnItsLease(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	if _, err := c.Client().Put(ctx, c.Keys().Owner("t", "foreign"), "someone-else", clientv3.WithLease(clientv3.LeaseID(s.Lease()))); err != nil {
		t.Fatal(err)
	}
	g, err := s.Claim(ctx, "t", "foreign")
	lgtest.Want(t, err, coordinator.Busy)
	if g != (coordinator.Grant{}) {
		t.Fatalf("busy claim returned grant %+v", g)
	}
}
