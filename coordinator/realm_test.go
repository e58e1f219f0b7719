package coordinator_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/internal/store"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestOpenNeverWrites: a read-only open of a prefix without a keyspace is
// no_keyspace and writes nothing; New creates the realm, Open then reads the
// same one; a prefix nested in a keyspace is invalid_input for both, and
// nothing is written.
func TestOpenNeverWrites(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	cli := cl.Client(t)
	ctx := lgtest.Ctx(t)
	var err error
	lgtest.RefusedWritingNothing(t, cli, "", coordinator.NoKeyspace, func() error {
		_, err = coordinator.Open(ctx, cli, coordinator.WithPrefix("/wrong"))
		return err
	})
	if want := "no leasegate keyspace at prefix /wrong"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open error %v; want it to say %q", err, want)
	}

	c, err := coordinator.New(ctx, cli, coordinator.WithPrefix("/lg"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := coordinator.Open(ctx, cli, coordinator.WithPrefix("/lg"))
	if err != nil || r.Realm() != c.Realm() {
		t.Fatalf("Open of an existing keyspace: %v, realm %q; want %q", err, r.Realm(), c.Realm())
	}
	again, err := coordinator.New(ctx, cli, coordinator.WithPrefix("/lg"))
	if err != nil || again.Realm() != c.Realm() {
		t.Fatalf("New of an existing keyspace: %v, realm %q; want %q", err, again.Realm(), c.Realm())
	}

	for _, p := range []string{"/lg/owner", "/lg/a/b", "/lg/realm", "/lg/drillx/a", "/lg/x/drill/a"} {
		lgtest.RefusedWritingNothing(t, cli, "", coordinator.InvalidInput, func() error {
			_, err := coordinator.Open(ctx, cli, coordinator.WithPrefix(p))
			return err
		})
		lgtest.RefusedWritingNothing(t, cli, "", coordinator.InvalidInput, func() error {
			_, err = coordinator.New(ctx, cli, coordinator.WithPrefix(p))
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "nested inside the leasegate keyspace at /lg") {
			t.Fatalf("New(%s): %v; want the enclosing keyspace named", p, err)
		}
	}
	// A sibling whose name merely starts like the keyspace is not nested.
	if _, err := coordinator.New(ctx, cli, coordinator.WithPrefix("/lgx")); err != nil {
		t.Fatal(err)
	}
	// The keyspace's NestedSubtree is the one place another may live (the
	// drill's runs, under the one role on the prefix).
	if _, err := coordinator.New(ctx, cli, coordinator.WithPrefix("/lg"+store.NestedSubtree+"run-1")); err != nil {
		t.Fatalf("New under the nested subtree: %v", err)
	}
	for _, bad := range []coordinator.Option{coordinator.WithPrefix("x"), coordinator.WithRequestTimeout(0),
		coordinator.WithMaxTxnOps(2), coordinator.WithMaxRequestBytes(10)} {
		_, err := coordinator.Open(ctx, cli, bad)
		lgtest.Want(t, err, coordinator.InvalidInput)
	}
}

// TestConcurrentNewAgreesOnOneRealm: coordinators created at once on an
// empty prefix all read the absent realm, race to create it, and end with
// the one realm that won (the create compares CreateRevision == 0).
func TestConcurrentNewAgreesOnOneRealm(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	cli := cl.Client(t)
	ctx := lgtest.Ctx(t)
	const n = 8
	start := make(chan struct{})
	realms := make(chan string, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			<-start
			c, err := coordinator.New(ctx, cli, coordinator.WithPrefix("/race"))
			if err != nil {
				errs <- err
				return
			}
			realms <- c.Realm()
		}()
	}
	close(start)
	seen := map[string]bool{}
	for range n {
		select {
		case r := <-realms:
			seen[r] = true
		case err := <-errs:
			t.Fatal(err)
		}
	}
	stored, err := coordinator.Open(ctx, cli, coordinator.WithPrefix("/race"))
	if err != nil || len(seen) != 1 || !seen[stored.Realm()] {
		t.Fatalf("concurrent New: realms %v, stored %v (%v); want one, the stored one", seen, stored, err)
	}
}

// TestNewRefusesAnAncestorCreatedAfterItsRead: New reads the realm and the
// enclosing prefixes' realm keys, then creates its realm in a Txn. Another
// process creates a keyspace at an enclosing prefix between the two; the
// create must compare that the ancestor realm keys are still absent, so New
// is invalid_input naming the enclosing keyspace, and nothing is written
// under its own prefix.
func TestNewRefusesAnAncestorCreatedAfterItsRead(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	ctx := lgtest.Ctx(t)
	other := cl.Client(t)
	var txns atomic.Int32
	var ancestor *coordinator.Coordinator
	var ancestorErr error
	// After New's first Txn (its read) has answered, and before its
	// create is sent, another client creates the keyspace at /anc.
	afterRead := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if method == "/etcdserverpb.KV/Txn" && txns.Add(1) == 1 {
			ancestor, ancestorErr = coordinator.New(ctx, other, coordinator.WithPrefix("/anc"))
		}
		return err
	}
	cli, err := cl.NewClient(grpc.WithChainUnaryInterceptor(afterRead))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })

	lgtest.RefusedWritingNothing(t, other, "/anc/inner", coordinator.InvalidInput, func() error {
		_, err = coordinator.New(ctx, cli, coordinator.WithPrefix("/anc/inner"))
		return err
	})
	if ancestorErr != nil || ancestor == nil {
		t.Fatalf("the enclosing keyspace was not created between New's read and its create: %v", ancestorErr)
	}
	if n := txns.Load(); n < 2 {
		t.Fatalf("New sent %d Txn; want its read, then its create", n)
	}
	if want := "nested inside the leasegate keyspace at /anc"; !strings.Contains(err.Error(), want) {
		t.Fatalf("New: %v; want it to say %q", err, want)
	}
}

// TestNestingIsCheckedAtEveryEnclosingPrefix: a keyspace at /outer/lg,
// whose own parent /outer holds none, encloses /outer/lg/a and
// /outer/lg/a/b: New and Open of either are invalid_input naming
// /outer/lg, and write nothing.
func TestNestingIsCheckedAtEveryEnclosingPrefix(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	cli := cl.Client(t)
	ctx := lgtest.Ctx(t)
	if _, err := coordinator.New(ctx, cli, coordinator.WithPrefix("/outer/lg")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/outer/lg/a", "/outer/lg/a/b"} {
		var err error
		lgtest.RefusedWritingNothing(t, cli, "", coordinator.InvalidInput, func() error {
			_, err = coordinator.New(ctx, cli, coordinator.WithPrefix(p))
			return err
		})
		if want := "nested inside the leasegate keyspace at /outer/lg "; !strings.Contains(err.Error(), want) {
			t.Fatalf("New(%s): %v; want it to say %q", p, err, want)
		}
		lgtest.RefusedWritingNothing(t, cli, "", coordinator.InvalidInput, func() error {
			_, err = coordinator.Open(ctx, cli, coordinator.WithPrefix(p))
			return err
		})
	}
}

// TestNewHeldOnItsReadKeepsTheNestingCheck: the enclosing prefixes are
// read without the nesting check only when etcd's auth denies reading
// them. A read that fails as a hold (its answer lost) is
// authority_unavailable, and nothing is written; the same New, answered,
// is invalid_input: never a keyspace created inside another.
func TestNewHeldOnItsReadKeepsTheNestingCheck(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t)
	root := cl.Client(t)
	ctx := lgtest.Ctx(t)
	if _, err := coordinator.New(ctx, root, coordinator.WithPrefix("/lg")); err != nil {
		t.Fatal(err)
	}
	lost := &lgtest.TxnAnswers{Err: status.Error(codes.Unavailable, "answer lost (test)"), Once: true}
	cli := lgtest.ClientWith(t, cl, lost)
	for _, open := range []func() (*coordinator.Coordinator, error){
		func() (*coordinator.Coordinator, error) {
			return coordinator.New(ctx, cli, coordinator.WithPrefix("/lg/inner"))
		},
		func() (*coordinator.Coordinator, error) {
			return coordinator.Open(ctx, cli, coordinator.WithPrefix("/lg/inner"))
		},
	} {
		lost.Arm()
		lgtest.RefusedWritingNothing(t, root, "", coordinator.AuthorityUnavailable, func() error {
			_, err := open()
			return err
		})
		lgtest.RefusedWritingNothing(t, root, "", coordinator.InvalidInput, func() error {
			_, err := open()
			return err
		})
	}
}
