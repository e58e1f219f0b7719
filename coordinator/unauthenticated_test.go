package coordinator_test

import (
	"time"

	"testing"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

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
