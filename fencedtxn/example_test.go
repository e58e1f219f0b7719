package fencedtxn_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/fencedtxn"
)

// Claim a task and make a protected write; a retry of the same intent gets
// the original receipt back. (The README's Go example, kept compiling.)
func Example() {
	dir, _ := os.MkdirTemp("", "leasegate-example")
	defer os.RemoveAll(dir)
	cluster, err := embedtest.Start(dir) // or clientv3.New with your --endpoints
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	cli, err := cluster.NewClient() // carries coordinator.DialOptions()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c, err := coordinator.New(ctx, cli)
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := c.NewSession(ctx, "worker-1", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close(ctx)
	g, err := s.Claim(ctx, "tenant-a", "task-a")
	if err != nil {
		fmt.Println(coordinator.DispositionOf(err), err)
		return
	}
	intent := fencedtxn.Intent{Tenant: "tenant-a", Task: "task-a", Operation: "promote-db-2026-11-30", Value: []byte("replica-b")}
	for range 2 {
		r, err := fencedtxn.Commit(ctx, c, g, intent, fencedtxn.WithSession(s))
		switch coordinator.DispositionOf(err) {
		case coordinator.OK:
			fmt.Println(r.Disposition, "version", r.CommittedVersion)
		case coordinator.StaleOwner, coordinator.ExpiredOwner:
			fmt.Println("stop acting for this task:", err)
		case coordinator.OutcomeUnknown:
			fmt.Println("retry the same intent to learn:", err)
		case coordinator.AuthorityUnavailable:
			fmt.Println("hold; nothing was written:", err)
		default:
			fmt.Println(err)
		}
	}
	// Output:
	// committed version 1
	// historical_retry version 1
}
