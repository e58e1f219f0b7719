package bench

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/testsupport/lgtest"
)

// TestDeleteWatchResumesAfterEtcdCancelsIt: the expiry watch's member loses
// its leader, so etcd cancels the watch (it requires one); the key is
// deleted on the majority meanwhile. Once the member is back, the watch —
// resumed from the revision after the last it delivered — still sees the
// deletion. A watch that ended with its first cancellation would wait out
// its timeout.
func TestDeleteWatchResumesAfterEtcdCancelsIt(t *testing.T) {
	t.Parallel()
	cl := embedtest.NewCluster(t, embedtest.WithSize(3))
	leader := cl.WaitLeader(t)
	follower := (leader + 1) % cl.Size()
	ctx := lgtest.Ctx(t)
	direct := cl.Client(t)
	if _, err := direct.Put(ctx, "/scale/owner/k", "v"); err != nil {
		t.Fatal(err)
	}
	one, err := clientv3.New(clientv3.Config{Endpoints: []string{cl.Member(follower).ClientURL()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	w, err := newDeleteWatch(ctx, one, "/scale/owner/")
	if err != nil {
		t.Fatal(err)
	}
	defer w.stop()

	cl.Partition(follower)
	healed := false
	defer func() {
		if !healed {
			cl.Heal()
		}
	}()
	select { // etcd cancels the follower's watch once it has had no leader for a while
	case <-w.cut:
	case <-ctx.Done():
		t.Fatal("etcd did not cancel the watch of a member without a leader")
	}
	if _, err := direct.Delete(ctx, "/scale/owner/k"); err != nil {
		t.Fatal(err)
	}
	cl.Heal()
	healed = true
	deleted, err := w.wait(ctx, 1, 20*time.Second)
	if err != nil {
		t.Fatalf("the deletion made while the watch was cancelled: %v", err)
	}
	if _, ok := deleted["/scale/owner/k"]; !ok {
		t.Fatalf("deleted %v, want /scale/owner/k", deleted)
	}
}
