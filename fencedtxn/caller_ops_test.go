package fencedtxn_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestCallerOpThatIsARangeIsInvalidInput: a delete from /a to /z would
// cover leasegate's own keys whatever its first key; a caller op that is a
// range is invalid_input and nothing is written (issue 13; pinned for
// indep/commit/range-op-accepted).
func TestCallerOpThatIsARangeIsInvalidInput(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "ranged")
	if _, err := c.Client().Put(ctx, "/a", "caller's"); err != nil {
		t.Fatal(err)
	}
	in := fencedtxn.Intent{Tenant: "t", Task: "ranged", Operation: "op", Value: []byte("v")}
	for name, op := range map[string]clientv3.Op{
		"a delete from /a to /z":   clientv3.OpDelete("/a", clientv3.WithRange("/z")),
		"a delete of a prefix":     clientv3.OpDelete("/a", clientv3.WithPrefix()),
		"a delete from /a onwards": clientv3.OpDelete("/a", clientv3.WithFromKey()),
	} {
		t.Run(name, func(t *testing.T) {
			lgtest.RefusedWritingNothing(t, c.Client(), "/", coordinator.InvalidInput, func() error {
				_, err := fencedtxn.Commit(ctx, c, g, in, fencedtxn.WithOps(op))
				return err
			})
		})
	}
}

// TestCallerOpUnderASiblingPrefixCommits: leasegate's keys are those under
// "<prefix>/"; a caller key that merely starts with the prefix's text
// (/leasegate-app/... beside /leasegate) is the caller's own and commits
// with the state (pinned for indep/commit/prefix-no-slash).
func TestCallerOpUnderASiblingPrefixCommits(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "sibling")
	key := c.Keys().Prefix() + "-app/config"
	in := fencedtxn.Intent{Tenant: "t", Task: "sibling", Operation: "op", Value: []byte("v")}
	if _, err := fencedtxn.Commit(ctx, c, g, in, fencedtxn.WithOps(clientv3.OpPut(key, "x"))); err != nil {
		t.Fatalf("commit with a caller op on %s: %v", key, err)
	}
	if resp, err := c.Client().Get(ctx, key); err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "x" {
		t.Fatalf("caller key after the commit: %v %v", resp, err)
	}
}

// TestValueOfExactlyTheLimitCommits: WithMaxValueBytes(n) accepts a value
// of n bytes and refuses n+1, writing nothing (pinned for
// indep/commit/value-limit-inclusive).
func TestValueOfExactlyTheLimitCommits(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	c := lgtest.Coordinator(t, cl)
	ctx := lgtest.Ctx(t)
	g := lgtest.Claim(t, lgtest.Session(t, c, "worker", 10*time.Second), "t", "limit")
	const n = 64
	over := fencedtxn.Intent{Tenant: "t", Task: "limit", Operation: "over", Value: make([]byte, n+1)}
	lgtest.RefusedWritingNothing(t, c.Client(), c.Keys().Prefix(), coordinator.InvalidInput, func() error {
		_, err := fencedtxn.Commit(ctx, c, g, over, fencedtxn.WithMaxValueBytes(n))
		return err
	})
	at := fencedtxn.Intent{Tenant: "t", Task: "limit", Operation: "at", Value: make([]byte, n)}
	if r, err := fencedtxn.Commit(ctx, c, g, at, fencedtxn.WithMaxValueBytes(n)); err != nil || r.Disposition != coordinator.Committed {
		t.Fatalf("a value of exactly %d bytes: %+v %v; want committed", n, r, err)
	}
}
