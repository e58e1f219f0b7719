package embedtest_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestSecuredCluster: three members talking TLS to each other and to
// clients, with auth on. A user whose role has readwrite on the leasegate
// prefix only can claim and commit through the library; a client without
// a certificate, or without a login, gets nothing.
func TestSecuredCluster(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3), embedtest.WithTLS(), embedtest.WithAuth("root-pw"))
	files := cl.TLSFiles()
	for _, ep := range cl.Endpoints() {
		if ep[:8] != "https://" {
			t.Fatalf("endpoint %s is not TLS", ep)
		}
	}
	// A write commits through raft: the members reach each other over
	// peer TLS with the generated certificates.
	cl.WaitLeader(t)
	cl.AddPrefixUser(t, "worker", "worker-pw", coordinator.DefaultPrefix+"/")

	t.Run("a user with readwrite on the prefix claims and commits", func(t *testing.T) {
		ctx := lgtest.Ctx(t)
		c := lgtest.CoordinatorOf(t, cl.ClientAs(t, "worker", "worker-pw"))
		s := lgtest.Session(t, c, "worker-1", 10*time.Second)
		g := lgtest.Claim(t, s, "tenant", "task")
		r, err := fencedtxn.Commit(ctx, c, g, fencedtxn.Intent{Tenant: "tenant", Task: "task", Operation: "op-1", Value: []byte("v"), ExpectedVersion: 0})
		if err != nil || r.Disposition != coordinator.Committed {
			t.Fatalf("commit: %+v, %v", r, err)
		}
		if err := c.Release(ctx, g); err != nil {
			t.Fatalf("release: %v", err)
		}
	})
	t.Run("a role without the prefix: permission_denied, nothing written", func(t *testing.T) {
		cl.AddPrefixUser(t, "stranger", "stranger-pw", "/other/")
		root := cl.Client(t)
		stranger := cl.ClientAs(t, "stranger", "stranger-pw")
		lgtest.RefusedWritingNothing(t, root, coordinator.DefaultPrefix+"/", coordinator.PermissionDenied, func() error {
			_, err := coordinator.New(lgtest.Ctx(t), stranger)
			return err
		})
		lgtest.RefusedWritingNothing(t, root, coordinator.DefaultPrefix+"/", coordinator.PermissionDenied, func() error {
			_, err := coordinator.Open(lgtest.Ctx(t), stranger)
			return err
		})
	})
	t.Run("no client certificate: refused at the handshake", func(t *testing.T) {
		pool := x509.NewCertPool()
		ca, err := os.ReadFile(files.CA)
		if err != nil || !pool.AppendCertsFromPEM(ca) {
			t.Fatalf("CA %s: %v", files.CA, err)
		}
		// Root's login: only the missing certificate can fail it.
		cli, err := clientv3.New(clientv3.Config{Endpoints: cl.Endpoints(), DialTimeout: 2 * time.Second,
			TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, Logger: zap.NewNop(),
			Username: embedtest.RootUser, Password: cl.RootPassword(), DialOptions: coordinator.DialOptions()})
		if err == nil {
			defer cli.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err = cli.Get(ctx, "k")
		}
		if err == nil {
			t.Fatal("a client without a certificate was served")
		}
		t.Logf("refused: %v", err)
	})
	t.Run("no login: refused", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := cl.ClientAs(t, "", "").Get(ctx, coordinator.DefaultPrefix+"/realm"); err == nil {
			t.Fatal("a client without a login read a key")
		}
	})
}
