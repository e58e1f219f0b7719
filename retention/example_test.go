package retention_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/leasegate/leasegate/coordinator"
	"github.com/leasegate/leasegate/embedtest"
	"github.com/leasegate/leasegate/retention"
)

// A service collects well inside the window: here a 24-hour window (a
// retry gets its receipt for a day). It runs col.Run every hour (a
// time.Ticker); a hold (etcd unreachable, no_space) is tried again at the
// next tick. Several replicas may run it at once; every deletion is
// guarded. Here one run on a fresh keyspace, which has nothing to delete.
func ExampleCollector_Run() {
	dir, _ := os.MkdirTemp("", "leasegate-example")
	defer os.RemoveAll(dir)
	cluster, err := embedtest.Start(dir) // or clientv3.New with your --endpoints
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	cli, err := cluster.NewClient()
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

	col, err := retention.New(c, retention.WithWindow(24*time.Hour))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, r, err := col.Run(ctx)
	if err != nil {
		fmt.Println("retention:", coordinator.DispositionOf(err), err) // a hold: try again at the next tick
		return
	}
	fmt.Printf("retention: deleted %d keys, %d kept by their guards\n", len(r.Deleted), len(r.Kept))
	// Output:
	// retention: deleted 0 keys, 0 kept by their guards
}
