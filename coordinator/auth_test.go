package coordinator_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestPermissionDenied runs on a cluster with auth on: a user whose role has
// readwrite on the leasegate prefix only can do everything (including a
// prefix nested in paths it cannot read); outside it, or with no role, the
// answer is permission_denied — not a hold, not unknown — and nothing is
// written.
func TestPermissionDenied(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithAuth("root-pw"))
	cl.AddPrefixUser(t, "alice", "alice-pw", "/apps/lg/")
	cl.AddPrefixUser(t, "bob", "bob-pw", "/elsewhere/")
	root := cl.Client(t)
	ctx := lgtest.Ctx(t)

	alice := cl.ClientAs(t, "alice", "alice-pw")
	c, err := coordinator.New(ctx, alice, coordinator.WithPrefix("/apps/lg"))
	if err != nil {
		t.Fatalf("New as a user with readwrite on the prefix only: %v", err)
	}
	s := lgtest.Session(t, c, "worker", 10*time.Second)
	g := lgtest.Claim(t, s, "t", "k")
	if _, err := fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Leases(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := coordinator.Open(ctx, alice, coordinator.WithPrefix("/apps/lg")); err != nil {
		t.Fatal(err)
	}

	bob := cl.ClientAs(t, "bob", "bob-pw")
	for name, open := range map[string]func() error{
		"New outside the role's prefix": func() error {
			_, err := coordinator.New(ctx, bob, coordinator.WithPrefix("/apps/lg"))
			return err
		},
		"Open outside the role's prefix": func() error {
			_, err := coordinator.Open(ctx, bob, coordinator.WithPrefix("/apps/lg"))
			return err
		},
	} {
		t.Run(name, func(t *testing.T) { lgtest.RefusedWritingNothing(t, root, "", coordinator.PermissionDenied, open) })
	}
	// No credentials at all: etcd does not know who asks (unauthenticated,
	// exit 6 in the CLI as permission_denied is).
	anonymous := cl.ClientAs(t, "", "")
	lgtest.RefusedWritingNothing(t, root, "", coordinator.Unauthenticated, func() error {
		_, err := coordinator.New(ctx, anonymous, coordinator.WithPrefix("/apps/lg"))
		return err
	})
	// A commit whose caller op lies outside the role's prefix: etcd's auth
	// refuses the whole Txn.
	bc, err := coordinator.New(ctx, bob, coordinator.WithPrefix("/elsewhere"))
	if err != nil {
		t.Fatal(err)
	}
	bg := lgtest.Claim(t, lgtest.Session(t, bc, "bob", 10*time.Second), "t", "k")
	lgtest.RefusedWritingNothing(t, root, "", coordinator.PermissionDenied, func() error {
		_, err := fencedtxn.Commit(ctx, bc, bg, fencedtxn.Intent{Tenant: "t", Task: "k", Operation: "op", Value: []byte("v")},
			fencedtxn.WithOps(clientv3.OpPut("/apps/not-bobs", "x")))
		return err
	})
}

// TestTokenNotRenewableIsUnauthenticated: a client logged in whose
// password is changed under it holds a token etcd no longer accepts; the
// etcd client logs in again with the old password and fails. That is
// unauthenticated — fix the credentials — never a hold or permission_denied.
func TestTokenNotRenewableIsUnauthenticated(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithAuth("root-pw"))
	cl.AddPrefixUser(t, "alice", "alice-pw", "/lg/")
	ctx := lgtest.Ctx(t)
	c, err := coordinator.New(ctx, cl.ClientAs(t, "alice", "alice-pw"), coordinator.WithPrefix("/lg"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Leases(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Client(t).UserChangePassword(ctx, "alice", "new-pw"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Leases(ctx)
	lgtest.Want(t, err, coordinator.Unauthenticated)
	s, err := c.NewSession(ctx, "worker", 10*time.Second)
	if err == nil {
		_ = s.Close(ctx)
	}
	lgtest.Want(t, err, coordinator.Unauthenticated)
}
